package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Futures;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Waiter;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A count-down latch at one key ({@code LATCH.*}), shared with Redisson's
 * {@code RCountDownLatch} on the same name, used like
 * {@link java.util.concurrent.CountDownLatch}: {@link #trySetCount} arms
 * it, {@link #countDown()} counts down, {@link #await()} waits until it is
 * open. It is open when the key is absent or its count is 0 or less.
 *
 * <p>A wait queues in the server on a connection of its own and is
 * answered the moment the latch opens, whatever opens it (a count-down by
 * anyone, a Redisson client's included, {@code DEL}, the key's expiry).
 * An interrupted wait closes its connection (the server drops the waiter).
 *
 * <pre>{@code
 * Latch ready = hashlock.latch("batch:7:ready");
 * ready.trySetCount(3);                        // three workers
 * ...                                          // each worker: ready.countDown()
 * if (ready.await(30, TimeUnit.SECONDS)) merge();
 * }</pre>
 */
public final class Latch {
    private final Hashlock hashlock;
    private final String name;
    private final byte[] key;

    Latch(Hashlock hashlock, String name) {
        this.hashlock = hashlock;
        this.name = name;
        this.key = Resp.bytes(name);
    }

    public String name() {
        return name;
    }

    /** {@code LATCH.CREATE}: sets the count ({@code >= 1}) if no latch exists (true); else changes nothing (false). */
    public boolean trySetCount(long count) {
        if (count < 1) throw new IllegalArgumentException("count must be >= 1");
        return Long.valueOf(1).equals(call(b("LATCH.CREATE"), key, b(Long.toString(count))));
    }

    /** {@code LATCH.COUNTDOWN}: counts down once; returns the count left (0: open, every waiter answered). */
    public long countDown() {
        return (Long) call(b("LATCH.COUNTDOWN"), key);
    }

    /** The count (0 when open). */
    public long getCount() {
        return (Long) call(b("LATCH.COUNT"), key);
    }

    /** Waits until the latch is open, as long as it takes. */
    public void await() throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        while (!await(0L)) {
            // nil from BLOCK 0: the server ended the wait (CLIENT UNBLOCK); wait again
            if (Thread.interrupted()) throw new InterruptedException();
        }
    }

    /**
     * Waits up to {@code time} for the latch to open (the server's BLOCK);
     * true if it is open, false if the time ran out. {@code time} ≤ 0: looks
     * once.
     */
    public boolean await(long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        long ms = Semaphore.blockMs(time, unit);
        if (ms <= 0) return call(b("LATCH.AWAIT"), key) != null;
        return await(ms);
    }

    private boolean await(long block) throws InterruptedException {
        if (hashlock.closed()) throw new IllegalStateException("hashlock is closed");
        List<byte[]> args = List.of(b("LATCH.AWAIT"), key, b("BLOCK"), b(Long.toString(block)));
        Waiter.Answer answer;
        try {
            answer = Waiter.await(hashlock.router(), key, args, block == 0 ? 0 : block + Lock.WAIT_MARGIN_MS, true, node -> {
                // a latch grants nothing: there is nothing to give back
            });
        } catch (Futures.ClientTimeoutException e) {
            throw new ConnectionException("latch " + name + ": the server did not answer the wait in time; the wait was given up", e);
        }
        hashlock.router().pool().giveBack(answer.connection());
        return Errors.check(answer.reply()) != null;
    }

    private Object call(byte[]... args) {
        return Errors.check(hashlock.router().call(key, List.of(args)));
    }

    private static byte[] b(String s) {
        return Resp.bytes(s);
    }

    @Override
    public String toString() {
        return "hashlock.Latch[" + name + "]";
    }
}
