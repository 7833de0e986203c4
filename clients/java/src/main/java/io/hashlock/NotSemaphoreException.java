package io.hashlock;

/** {@code NOTSEMAPHORE}: the key holds a string that is not a permit count; nothing was changed. */
public class NotSemaphoreException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public NotSemaphoreException(String message) {
        super(message);
    }
}
