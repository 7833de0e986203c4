package io.hashlock;

/**
 * This owner does not hold the lock any more, although it had it: its lease
 * ran out, it was force-released, or its KEEPALIVE connection closed. Thrown
 * by {@code unlock()}, {@code renew()} and a re-entry that find it gone, and
 * carried by the {@link LossSignal} when the loss is seen first in the
 * background. Whatever the lock protected may have been touched by someone
 * else meanwhile: stop, and do not trust what was done since {@link #lostAtNanos()}.
 */
public class LockLostException extends HashlockException {
    private static final long serialVersionUID = 1L;

    private final LossReason reason;
    private final long lostAtNanos;

    public LockLostException(LossReason reason, String message) {
        this(reason, message, null);
    }

    public LockLostException(LossReason reason, String message, Throwable cause) {
        super(message, cause);
        this.reason = reason;
        this.lostAtNanos = System.nanoTime();
    }

    /** How the loss was seen. */
    public LossReason reason() {
        return reason;
    }

    /** {@link System#nanoTime()} when the loss was seen (it may have happened earlier). */
    public long lostAtNanos() {
        return lostAtNanos;
    }
}
