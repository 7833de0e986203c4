package io.hashlock.testing;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The release of a holder and the interrupt of a waiter at the same moment,
 * many times, for any primitive: whatever the order, an interrupted wait
 * must leave nothing held by the waiter (checked in the waiter's thread as
 * soon as InterruptedException arrives, before anything else runs); a wait
 * that won the race holds what it asked for and lets it go itself.
 */
public final class Race {
    private Race() {}

    /** One primitive's side of the race. */
    public interface Trial {
        /** In the holder's thread: take what the waiter will wait for. */
        void hold() throws Exception;

        /** In the holder's thread: let it go. */
        void release() throws Exception;

        /** In the waiter's thread: wait (interruptibly); true if granted (then let it go before returning). */
        boolean await() throws Exception;

        /** In the waiter's thread, right after InterruptedException: null if the waiter holds nothing, else what it holds. */
        String leftover() throws Exception;

        /** Clients queued now on the key (the waiter is queued when this is 1). */
        long queued();

        /** After the trial: null once the primitive is back where it started, else how it is not. */
        String settled();
    }

    /** Counts of one run. */
    public record Result(int granted, int interrupted) {}

    /** Waiters queued on {@code key} (LOCK.WAITERS works for every primitive). */
    public static long waiters(TestServer s, String key) {
        return ((List<?>) s.cmd("LOCK.WAITERS", key)).size();
    }

    public static Result run(String what, int trials, java.util.function.IntFunction<Trial> newTrial) throws Exception {
        int granted = 0;
        int interrupted = 0;
        for (int i = 0; i < trials; i++) {
            Trial t = newTrial.apply(i);
            CountDownLatch held = new CountDownLatch(1);
            CountDownLatch go = new CountDownLatch(1);
            AtomicReference<Throwable> holderFailed = new AtomicReference<>();
            Thread holder = new Thread(() -> {
                try {
                    t.hold();
                    held.countDown();
                    go.await();
                    t.release();
                } catch (Throwable e) {
                    holderFailed.set(e);
                    held.countDown();
                }
            });
            holder.setDaemon(true);
            holder.start();
            assertTrue(held.await(5, TimeUnit.SECONDS));
            assertNull(holderFailed.get(), "the holder failed");
            AtomicReference<Thread> waiterThread = new AtomicReference<>();
            CompletableFuture<String> wait = Threads.onThread(() -> {
                waiterThread.set(Thread.currentThread());
                try {
                    return t.await() ? "granted" : "not granted";
                } catch (InterruptedException e) {
                    String left = t.leftover();
                    return left == null ? "interrupted" : "interrupted, yet holds " + left;
                }
            });
            assertTrue(TestServer.waitFor(5000, () -> t.queued() == 1), what + " trial " + i + ": the waiter is not queued");
            // Spread the two over a few hundred microseconds, both orders.
            long skewNanos = (i % 7) * 60_000L;
            go.countDown();
            long until = System.nanoTime() + skewNanos;
            while (System.nanoTime() < until) Thread.onSpinWait();
            waiterThread.get().interrupt();
            holder.join(5000);
            assertNull(holderFailed.get(), "the holder failed");
            String r = wait.get(15, TimeUnit.SECONDS);
            if (r.equals("granted")) granted++;
            else if (r.equals("interrupted")) interrupted++;
            else throw new AssertionError(what + " trial " + i + ": " + r);
            assertTrue(TestServer.waitFor(2000, () -> t.settled() == null), what + " trial " + i + ": " + t.settled());
        }
        System.out.printf("race %s: %d trials, %d granted before the interrupt, %d interrupted, none left holding%n", what, trials, granted, interrupted);
        assertTrue(interrupted > 0, what + ": no trial interrupted the wait: the race was not exercised");
        return new Result(granted, interrupted);
    }
}
