package io.hashlock;

/** How a lost hold was noticed. */
public enum LossReason {
    /**
     * The hold's connection closed, was reset or failed (the server was
     * shut down, {@code CLIENT KILL}, a network error): a KEEPALIVE lock is
     * released by the server the moment its connection goes.
     */
    CONNECTION_LOST,
    /**
     * The server says this owner does not hold it (any more): its lease
     * lapsed, it was force-released or deleted, or a release found it gone.
     */
    NOT_HELD,
    /** The watchdog (KEEPALIVE off) could not renew the lease before it ran out. */
    RENEWAL_FAILED,
}
