package io.hashlock;

/**
 * hashlock could not talk to the server: connect failed, the connection
 * closed, or the server stopped answering. A command that was sent may or
 * may not have run.
 */
public class ConnectionException extends HashlockException {
    private static final long serialVersionUID = 1L;

    public ConnectionException(String message, Throwable cause) {
        super(message, cause);
    }
}
