package io.hashlock;

/**
 * The server does not send the module's lifecycle keyspace events: its
 * {@code notify-keyspace-events} lacks K (or E), or d (or A). An
 * {@link Election} needs them (its observers and its leaders' revocation are
 * driven by them); the message says what to set.
 */
public class EventsOffException extends HashlockException {
    private static final long serialVersionUID = 1L;

    private final String flags;
    private final String wanted;

    public EventsOffException(Connector.Node node, String flags, String wanted) {
        super("the server at " + node + " has notify-keyspace-events \"" + flags + "\", without the module's lifecycle events "
                + "(they need K or E, and d or A): run CONFIG SET notify-keyspace-events " + wanted
                + " (in redis.conf: notify-keyspace-events " + wanted + ")");
        this.flags = flags;
        this.wanted = wanted;
    }

    /** The server's notify-keyspace-events now. */
    public String flags() {
        return flags;
    }

    /** What to set instead: the current flags with K and d added. */
    public String wanted() {
        return wanted;
    }

    static boolean hears(String flags) {
        return (flags.contains("K") || flags.contains("E")) && (flags.contains("d") || flags.contains("A"));
    }

    static String wanted(String flags) {
        String w = flags;
        if (!w.contains("K") && !w.contains("E")) w = "K" + w;
        if (!w.contains("d") && !w.contains("A")) w = w + "d";
        return w;
    }
}
