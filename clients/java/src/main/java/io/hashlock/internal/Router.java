package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.Connector;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Sends commands for a key to the node that serves it, on pooled
 * connections, following {@code MOVED} (the slot moved: remembered) and
 * {@code ASK} (the slot is migrating: {@code ASKING} first, once). Never
 * retries after a connection error: a command that may have run is not sent
 * again.
 */
public final class Router {
    /** Redirects followed for one call (a slot moves at most a few times while a client waits). */
    public static final int MAX_REDIRECTS = 5;
    private static final byte[] ASKING = Resp.bytes("ASKING");

    private final ConnectionPool pool;
    private final long commandTimeoutMs;
    /** Slots seen moving (MOVED), until the connector's own view catches up. */
    private final Map<Integer, Connector.Node> movedSlots = new ConcurrentHashMap<>();

    public Router(ConnectionPool pool, long commandTimeoutMs) {
        this.pool = pool;
        this.commandTimeoutMs = commandTimeoutMs;
    }

    public ConnectionPool pool() {
        return pool;
    }

    public long commandTimeoutMs() {
        return commandTimeoutMs;
    }

    public Connector.Node nodeFor(byte[] key) {
        Connector.Node n = movedSlots.get(Slots.of(key));
        return n != null ? n : pool.connector().nodeFor(key);
    }

    /** A {@code MOVED} or {@code ASK} reply, parsed; null for any other reply. */
    public record Redirect(boolean ask, int slot, Connector.Node node) {}

    public static Redirect redirect(Object reply, Connector.Node from) {
        if (!(reply instanceof Resp.ErrorReply e)) return null;
        String code = e.code();
        if (!code.equals("MOVED") && !code.equals("ASK")) return null;
        String[] parts = e.message().split(" ");
        if (parts.length < 3) return null;
        String addr = parts[2];
        int colon = addr.lastIndexOf(':');
        if (colon < 0) return null;
        String host = addr.substring(0, colon);
        if (host.isEmpty() || host.equals("?")) host = from.host();
        try {
            return new Redirect(code.equals("ASK"), Integer.parseInt(parts[1]), new Connector.Node(host, Integer.parseInt(addr.substring(colon + 1))));
        } catch (NumberFormatException ex) {
            return null;
        }
    }

    /** Remembers a MOVED and tells the connector. */
    public void moved(Redirect r) {
        if (r.ask()) return;
        movedSlots.put(r.slot(), r.node());
        pool.connector().moved(r.slot(), r.node());
    }

    /** Sends {@code args} on {@code c}, after ASKING when asked to; the command's reply future. */
    public static CompletableFuture<Object> send(RespConnection c, List<byte[]> args, boolean asking) {
        if (!asking) return c.send(args);
        List<List<byte[]>> both = new ArrayList<>(2);
        both.add(List.of(ASKING));
        both.add(args);
        return c.sendAll(both).get(1);
    }

    /**
     * A short command (it never blocks in the server) for {@code key}: the
     * reply, errors included (the caller maps them), redirects followed.
     */
    public Object call(byte[] key, List<byte[]> args) {
        return callFrom(nodeFor(key), key, args);
    }

    /** As {@link #call}, starting at {@code node}. */
    public Object callFrom(Connector.Node node, byte[] key, List<byte[]> args) {
        boolean asking = false;
        for (int redirects = 0; ; redirects++) {
            RespConnection c = borrow(node);
            Object reply;
            try {
                reply = Futures.awaitShort(send(c, args, asking), commandTimeoutMs);
            } catch (ConnectionException e) {
                c.close();
                throw e;
            }
            pool.giveBack(c);
            Redirect r = redirect(reply, node);
            if (r == null || redirects >= MAX_REDIRECTS) return reply;
            moved(r);
            node = r.node();
            asking = r.ask();
        }
    }

    /** A pooled connection to {@code node}; a failure to connect forgets a remembered MOVED to it. */
    public RespConnection borrow(Connector.Node node) {
        try {
            return pool.borrow(node);
        } catch (ConnectionException e) {
            movedSlots.values().removeIf(node::equals);
            throw e;
        }
    }
}
