package io.hashlock;

import static io.hashlock.LockTest.info;
import static io.hashlock.LockTest.onThread;
import static io.hashlock.LockTest.waiters;
import static io.hashlock.testing.TestServer.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A wait given up on the client side closes its connection, and the
 * abandoned waiter is never granted — also when the release of the holder
 * and the cancellation happen together, so that a grant is already on its
 * way: it is given back before the InterruptedException is thrown.
 */
class CancellationTest {

    static Stream<Arguments> modes() {
        return Stream.of(TestServer.Kind.values()).flatMap(k -> Stream.of(
                Arguments.of(k, Connectors.JEDIS, true),
                Arguments.of(k, Connectors.LETTUCE, false),
                Arguments.of(k, Connectors.JEDIS, false)));
    }

    static LockOptions keepalive(boolean keepalive) {
        return LockOptions.builder().keepalive(keepalive).build();
    }

    @ParameterizedTest(name = "{0} {1} keepalive={2}")
    @MethodSource("modes")
    void anInterruptedWaitLeavesTheQueueAndIsNeverGranted(TestServer.Kind kind, Connectors via, boolean ka) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("interrupt");
        try (Hashlock a = via.hashlock(s.port, keepalive(ka)); Hashlock b = via.hashlock(s.port, keepalive(ka))) {
            Lock holder = a.lock(key);
            holder.lock();
            Lock waiter = b.lock(key);
            for (boolean timed : new boolean[] {false, true}) {
                AtomicReference<Thread> thread = new AtomicReference<>();
                CompletableFuture<Boolean> wait = onThread(() -> {
                    thread.set(Thread.currentThread());
                    if (timed) return waiter.tryLock(30, TimeUnit.SECONDS);
                    waiter.lockInterruptibly();
                    return true;
                });
                assertTrue(waitFor(5000, () -> waiters(s, key) == 1));
                thread.get().interrupt();
                ExecutionException e = assertThrows(ExecutionException.class, () -> wait.get(5, TimeUnit.SECONDS));
                assertInstanceOf(InterruptedException.class, e.getCause());
                // Gone from the queue when the exception arrives: its connection was closed.
                assertEquals(0, waiters(s, key));
            }
            holder.unlock();
            assertNull(info(s, key), "released to nobody: the abandoned waiters were not granted");
            assertTrue(waiter.tryLock(1, TimeUnit.SECONDS));
            waiter.unlock();
        }
    }

    /**
     * The holder's release and the waiter's interrupt at the same moment,
     * many times. Whatever the order, when the interrupted call returns
     * InterruptedException the lock is not held by the waiter's owner; when
     * the grant won the race, the call returns true and the waiter holds it.
     */
    @ParameterizedTest(name = "{0} {1} keepalive={2}")
    @MethodSource("modes")
    void releaseAndCancellationTogether(TestServer.Kind kind, Connectors via, boolean ka) throws Exception {
        TestServer s = TestServer.shared(kind);
        int trials = 60;
        int interrupted = 0;
        int granted = 0;
        try (Hashlock a = via.hashlock(s.port, keepalive(ka)); Hashlock b = via.hashlock(s.port, keepalive(ka))) {
            for (int trial = 0; trial < trials; trial++) {
                String key = Matrix.key("race");
                Lock holder = a.lock(key);
                Lock waiter = b.lock(key);
                CountDownLatch held = new CountDownLatch(1);
                CountDownLatch go = new CountDownLatch(1);
                // The holder locks and unlocks in its own thread (owners are threads).
                Thread releaser = new Thread(() -> {
                    holder.lock();
                    held.countDown();
                    try {
                        go.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    holder.unlock();
                });
                releaser.start();
                assertTrue(held.await(5, TimeUnit.SECONDS));
                AtomicReference<Thread> thread = new AtomicReference<>();
                AtomicReference<String> waiterOwner = new AtomicReference<>();
                CompletableFuture<Object> wait = onThread(() -> {
                    thread.set(Thread.currentThread());
                    waiterOwner.set(waiter.owner());
                    try {
                        if (!waiter.tryLock(30, TimeUnit.SECONDS)) return "nil";
                        // The grant arrived before the interrupt was seen: a real hold.
                        String o = info(s, key).owner();
                        waiter.unlock();
                        return "granted to " + o;
                    } catch (InterruptedException e) {
                        // Checked here, in the interrupted thread, before anything else runs.
                        LockInfo i = info(s, key);
                        return i == null ? "free" : i.owner();
                    }
                });
                assertTrue(waitFor(5000, () -> waiters(s, key) == 1));
                // Spread the two over a few hundred microseconds, both orders.
                long skewNanos = (trial % 7) * 60_000L;
                go.countDown();
                long until = System.nanoTime() + skewNanos;
                while (System.nanoTime() < until) Thread.onSpinWait();
                thread.get().interrupt();
                releaser.join(5000);
                Object r = wait.get(10, TimeUnit.SECONDS);
                if (String.valueOf(r).startsWith("granted")) {
                    granted++;
                    assertEquals("granted to " + waiterOwner.get(), r);
                } else {
                    interrupted++;
                    assertTrue(!waiterOwner.get().equals(r), "trial " + trial + ": the interrupted waiter holds the lock");
                }
                assertTrue(waitFor(2000, () -> info(s, key) == null), "trial " + trial + ": lock left held");
            }
            System.out.printf("race %s %s keepalive=%s: %d trials, %d granted before the interrupt, %d interrupted "
                    + "(%d grants already on their way given back)%n", kind, via, ka, trials, granted, interrupted, b.grantsGivenBack());
        }
        assertEquals(trials, granted + interrupted);
    }
}
