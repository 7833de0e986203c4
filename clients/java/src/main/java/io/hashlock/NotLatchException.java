package io.hashlock;

/** {@code NOTLATCH}: the key holds a string that is not a latch count; nothing was changed. */
public class NotLatchException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public NotLatchException(String message) {
        super(message);
    }
}
