package io.hashlock;

/**
 * An error reply from the server that has no more specific class here
 * ({@code ERR ...}, {@code READONLY ...}, {@code CROSSSLOT ...}, ...).
 * {@link #code()} is its first word.
 */
public class ServerErrorException extends HashlockException {
    private static final long serialVersionUID = 1L;

    public ServerErrorException(String message) {
        super(message);
    }

    /** The error code: the reply's first word (ERR, READONLY, NOTOWNER, ...). */
    public String code() {
        String m = getMessage();
        int sp = m.indexOf(' ');
        return sp < 0 ? m : m.substring(0, sp);
    }
}
