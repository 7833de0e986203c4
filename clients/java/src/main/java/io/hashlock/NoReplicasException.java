package io.hashlock;

/**
 * {@code NOREPLICAS}: fewer replicas than asked ({@code REPLICAS n ms})
 * acknowledged the grant or renewal in time; the server undid it.
 */
public class NoReplicasException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public NoReplicasException(String message) {
        super(message);
    }
}
