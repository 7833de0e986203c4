package io.hashlock;

/**
 * One term of a candidate, from the campaign that won it to its end: a
 * resignation, or a revocation (the leader's connection closed, the key was
 * force-released or its lease lapsed). {@link #signal()} fires on a
 * revocation, as it happens (the key's lifecycle events); the server has
 * handed the election on by then.
 */
public final class Leadership {
    private final Election election;
    private final Lock.Hold hold;

    Leadership(Election election, Lock.Hold hold) {
        this.election = election;
        this.hold = hold;
    }

    /** The term's number: greater than every earlier term's. Pass it to what you write. */
    public long term() {
        return hold.token;
    }

    /** The leader: this candidate and this term. */
    public Leader leader() {
        return new Leader(election.id(), hold.token);
    }

    /** Fires when the term is revoked (not on {@link #resign()}). */
    public LossSignal signal() {
        return hold.watch.signal();
    }

    /** True while the term lasts (as this process knows it). */
    public boolean isActive() {
        return !hold.watch.signal().isLost() && hold.active();
    }

    /** Ends the term: the next candidate in line leads at once. Nothing if it ended already. */
    public void resign() {
        if (!hold.active()) return;
        try {
            hold.release();
        } catch (LockLostException e) {
            // revoked meanwhile: it is not leading either way
        }
    }

    /** The hold underneath (for tests: its tied connection). */
    Lock.Hold hold() {
        return hold;
    }

    @Override
    public String toString() {
        return "Leadership[" + election.name() + ", " + election.id() + ", term " + term() + (isActive() ? "" : ", ended") + "]";
    }
}
