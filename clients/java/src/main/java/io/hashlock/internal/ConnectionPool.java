package io.hashlock.internal;

import io.hashlock.Connector;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * hashlock's own connections, per node. A connection is borrowed for one
 * short command, for a wait, or for as long as a KEEPALIVE hold lasts, and
 * comes back only when it holds nothing: no command in flight, no lock tied
 * to it. A wait that is given up on the client side never comes back: its
 * connection is closed, so the server drops the waiter with it.
 *
 * <p>Shared by every primitive of one {@link io.hashlock.Hashlock}.
 */
public final class ConnectionPool implements AutoCloseable {
    private final Connector connector;
    private final int maxIdlePerNode;
    private final long connectTimeoutMs;
    private final Map<Connector.Node, ArrayDeque<RespConnection>> idle = new HashMap<>();
    private final AtomicLong opened = new AtomicLong();
    private final AtomicLong discarded = new AtomicLong();
    private boolean closed;

    public ConnectionPool(Connector connector, int maxIdlePerNode, long connectTimeoutMs) {
        this.connector = connector;
        this.maxIdlePerNode = maxIdlePerNode;
        this.connectTimeoutMs = connectTimeoutMs;
    }

    public Connector connector() {
        return connector;
    }

    /** An idle open connection to {@code node}, or a new one. */
    public RespConnection borrow(Connector.Node node) {
        synchronized (this) {
            if (closed) throw new IllegalStateException("hashlock is closed");
            ArrayDeque<RespConnection> q = idle.get(node);
            while (q != null && !q.isEmpty()) {
                RespConnection c = q.pollLast();
                if (c.isOpen() && c.inFlight() == 0) return c;
                discarded.incrementAndGet();
                c.close();
            }
        }
        RespConnection c = RespConnection.open(connector, node, connectTimeoutMs);
        opened.incrementAndGet();
        return c;
    }

    /**
     * Takes back a connection that holds nothing. One that is closed, busy,
     * or beyond the idle limit is closed instead.
     */
    public void giveBack(RespConnection c) {
        if (c == null) return;
        synchronized (this) {
            if (!closed && c.isOpen() && c.inFlight() == 0) {
                ArrayDeque<RespConnection> q = idle.computeIfAbsent(c.node(), n -> new ArrayDeque<>());
                if (q.size() < maxIdlePerNode) {
                    q.addLast(c);
                    return;
                }
            }
        }
        discarded.incrementAndGet();
        c.close();
    }

    /** Connections opened since the pool was made (for tests and metrics). */
    public long opened() {
        return opened.get();
    }

    /** Idle connections now, all nodes. */
    public synchronized int idleCount() {
        int n = 0;
        for (ArrayDeque<RespConnection> q : idle.values()) n += q.size();
        return n;
    }

    @Override
    public void close() {
        List<RespConnection> all = new ArrayList<>();
        synchronized (this) {
            closed = true;
            for (ArrayDeque<RespConnection> q : idle.values()) all.addAll(q);
            idle.clear();
        }
        for (RespConnection c : all) c.close();
    }
}
