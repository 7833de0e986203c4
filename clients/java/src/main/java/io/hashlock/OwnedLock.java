package io.hashlock;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;

/**
 * {@link java.util.concurrent.locks.Lock}'s waiting methods over one
 * acquisition primitive, for the family's thread-owned locks (a
 * read-write lock's two halves, a multi-key lock): the same semantics as
 * {@link Lock}'s — {@code lock()} waits as long as it takes and is not
 * interruptible, {@code lockInterruptibly()} and {@code tryLock(time, unit)}
 * are, and an interrupted wait never leaves anything held.
 */
abstract class OwnedLock implements java.util.concurrent.locks.Lock {

    /**
     * @param block null: answer at once; 0: wait forever; else BLOCK ms
     * @return whether it was granted (false: nil, the wait ran out)
     */
    abstract boolean acquire(Long block, boolean interruptible) throws InterruptedException;

    /** Waits in the server's queue as long as it takes (interrupts do not end it; the status is set again on return). */
    @Override
    public void lock() {
        try {
            while (!acquire(0L, false)) {
                // nil from BLOCK 0: the server ended the wait (CLIENT UNBLOCK); wait again
            }
        } catch (InterruptedException e) {
            throw new AssertionError("not interruptible", e);
        }
    }

    /**
     * Waits in the server's queue until granted or interrupted. An
     * interrupted wait closes its connection (the server drops the waiter
     * and gives back a grant already on its way) before InterruptedException
     * is thrown.
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        while (!acquire(0L, true)) {
            if (Thread.interrupted()) throw new InterruptedException();
        }
    }

    /** Takes it (or re-enters it) if grantable now; never waits. */
    @Override
    public boolean tryLock() {
        try {
            return acquire(null, false);
        } catch (InterruptedException e) {
            throw new AssertionError("not interruptible", e);
        }
    }

    /** Waits up to {@code time} in the server's queue (BLOCK). Interrupted: as {@link #lockInterruptibly()}. */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        long ms = Semaphore.blockMs(time, unit);
        if (ms <= 0) return tryLock();
        return acquire(ms, true);
    }

    /** Not supported (nor in Redisson). */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("hashlock locks have no conditions");
    }
}
