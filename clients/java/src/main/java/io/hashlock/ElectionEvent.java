package io.hashlock;

/**
 * One change of leader as an observer sees it ({@link Election#observe}).
 *
 * @param kind what changed
 * @param leader the leader now ({@code NEW_LEADER}, {@code ELECTED}), the
 *     term that ended ({@code REVOKED}), null for {@code NO_LEADER}
 */
public record ElectionEvent(Kind kind, Leader leader) {
    public enum Kind {
        /** Another candidate than the observing one leads now. */
        NEW_LEADER,
        /** Nobody leads now. */
        NO_LEADER,
        /** The observing Election's own candidate leads now. */
        ELECTED,
        /** The observing Election's own candidate's term ended (the next event says who leads now). */
        REVOKED,
    }

    @Override
    public String toString() {
        return kind == Kind.NO_LEADER ? "NO_LEADER" : kind + " " + leader.id() + " term " + leader.term();
    }
}
