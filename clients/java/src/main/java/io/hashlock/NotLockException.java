package io.hashlock;

/** {@code NOTLOCK}: the key holds a hash that is not a lock; nothing was changed. */
public class NotLockException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public NotLockException(String message) {
        super(message);
    }
}
