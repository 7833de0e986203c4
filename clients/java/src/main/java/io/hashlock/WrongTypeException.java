package io.hashlock;

/** {@code WRONGTYPE}: the key holds a value that is not a hash; nothing was changed. */
public class WrongTypeException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public WrongTypeException(String message) {
        super(message);
    }
}
