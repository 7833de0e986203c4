package io.hashlock;

/**
 * The server's {@code NOTOWNER}: a release by an owner that does not hold the
 * lock (any more). A {@link LockLostException}, since for a lock this object
 * held it means the hold was lost.
 */
public class NotOwnerException extends LockLostException {
    private static final long serialVersionUID = 1L;

    public NotOwnerException(String message) {
        super(LossReason.NOT_HELD, message);
    }
}
