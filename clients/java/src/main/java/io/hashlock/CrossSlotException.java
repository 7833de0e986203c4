package io.hashlock;

/**
 * {@code CROSSSLOT} (cluster): the keys of one call, or a key and a key the
 * server derives from it (a fencing-token counter, a semaphore's
 * {@code {key}:timeout}, a read hold's timeout key), are in different
 * slots. Nothing was changed. Give related names one hash tag
 * ({@code {order:42}:a}, {@code {order:42}:b}: only the part in braces
 * decides the slot), and avoid names with a lone {@code {} or {@code }}.
 * {@link #serverMessage()} is the server's reply.
 */
public class CrossSlotException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    static final String GUIDANCE = " (the keys must share a slot: give them one hash tag, e.g. {order:42}:a and {order:42}:b, "
            + "and avoid names with a lone '{' or '}', whose derived keys land in another slot)";

    private final String serverMessage;

    public CrossSlotException(String serverMessage) {
        super(serverMessage + GUIDANCE);
        this.serverMessage = serverMessage;
    }

    /** The server's error reply, as it came. */
    public String serverMessage() {
        return serverMessage;
    }
}
