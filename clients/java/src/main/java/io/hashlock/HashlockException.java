package io.hashlock;

/** Base class of every error hashlock raises. Unchecked, like Redisson's. */
public class HashlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public HashlockException(String message) {
        super(message);
    }

    public HashlockException(String message, Throwable cause) {
        super(message, cause);
    }
}
