package io.hashlock;

/**
 * {@code NOUPGRADE}: a read-write lock's WRITE asked by an owner that holds
 * it for reading only. An upgrade would deadlock (two readers each waiting
 * for the other to leave); release the read holds first. Nothing was
 * changed: the read holds are still held.
 */
public class NoUpgradeException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public NoUpgradeException(String message) {
        super(message);
    }
}
