package io.hashlock;

/**
 * A campaign found its candidate id leading already through another
 * {@link Election} (another process given the same id). Ids must be unique
 * among the candidates of one election; the grant was given back.
 */
public class DuplicateCandidateException extends HashlockException {
    private static final long serialVersionUID = 1L;

    public DuplicateCandidateException(String message) {
        super(message);
    }
}
