package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.Connector;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;

/**
 * Lifecycle keyspace events: the module fires {@code lock.acquired},
 * {@code lock.released}, {@code lock.expired}, {@code lock.forced} and
 * {@code lock.closed} on {@code __keyspace@<db>__:<key>} at every change of
 * holder (class {@code d}). Holds and elections watch their key's channel
 * and look again when something arrives, so a holder learns of a forced
 * release or an expiry, and an observer of a new leader, as it happens.
 *
 * <p>One subscriber connection per node (not pooled) carries every
 * subscription of a {@link io.hashlock.Hashlock}. A channel is subscribed
 * while a watcher wants it and lingers {@link #LINGER_MS} after its last
 * watcher left, so taking the same lock again costs no SUBSCRIBE. When the
 * connection is lost it is made again in the background, and every watcher
 * is told once it is back (events may have been missed meanwhile). A server
 * without the events sends nothing on the channels.
 */
public final class Subscriber implements AutoCloseable {
    /** How often the subscriber connection is pinged, and lingering channels swept. */
    public static final long PING_MS = 5_000;
    /** How long a channel stays subscribed after its last watcher left. */
    public static final long LINGER_MS = 30_000;

    private final Router router;
    private final ScheduledExecutorService scheduler;
    private final ExecutorService workers;
    private final Map<Connector.Node, Node> nodes = new HashMap<>();
    private boolean closed;

    public Subscriber(Router router, ScheduledExecutorService scheduler, ExecutorService workers) {
        this.router = router;
        this.scheduler = scheduler;
        this.workers = workers;
    }

    /**
     * Watches {@code key}'s channel on the node serving it. {@code onEvent}
     * runs (on a reader thread: keep it short) for every event that
     * {@code wants} accepts, once when the subscription became active after
     * {@code sinceNanos} ({@link System#nanoTime()}: events may have come
     * before) or when an event came between {@code sinceNanos} and now, and
     * once after the connection was made again. Returns once
     * the subscription is active.
     *
     * @throws io.hashlock.HashlockException the server refused the
     *     subscription (an ACL without access to the channel)
     * @throws ConnectionException the node cannot be reached
     */
    public KeyWatch watch(byte[] key, long sinceNanos, Predicate<String> wants, Runnable onEvent) {
        Connector.Node addr = router.nodeFor(key);
        Node node;
        synchronized (this) {
            if (closed) throw new IllegalStateException("hashlock is closed");
            node = nodes.computeIfAbsent(addr, Node::new);
        }
        KeyWatch w = new KeyWatch(node, new String(key, StandardCharsets.ISO_8859_1), wants, onEvent);
        node.add(w, sinceNanos);
        return w;
    }

    @Override
    public void close() {
        List<Node> all;
        synchronized (this) {
            closed = true;
            all = new ArrayList<>(nodes.values());
            nodes.clear();
        }
        for (Node n : all) n.close();
    }

    /** One watcher's interest in a key's events. */
    public static final class KeyWatch implements AutoCloseable {
        private final Node node;
        /** The key's bytes as ISO-8859-1 text (byte-exact). */
        private final String key;
        private final Predicate<String> wants;
        private final Runnable onEvent;
        private boolean closed;

        private KeyWatch(Node node, String key, Predicate<String> wants, Runnable onEvent) {
            this.node = node;
            this.key = key;
            this.wants = wants;
            this.onEvent = onEvent;
        }

        /** The node the subscription is on. */
        public Connector.Node node() {
            return node.addr;
        }

        /** Ends the watch (the channel lingers a while, then is unsubscribed). */
        @Override
        public void close() {
            node.remove(this);
        }

        private void fire() {
            try {
                onEvent.run();
            } catch (RuntimeException ignored) {
                // a watcher's failure must not stop the others
            }
        }
    }

    private static final class ChannelState {
        final Set<KeyWatch> watchers = new HashSet<>();
        boolean active;
        long activeSinceNanos;
        long idleSinceNanos;
        /** When each event last arrived, by name. */
        final Map<String, Long> lastEventNanos = new HashMap<>();
    }

    private final class Node {
        final Connector.Node addr;
        /** Serialises subscription changes and (re)connecting. */
        final ReentrantLock op = new ReentrantLock();
        /** Guards the state below; the reader thread takes it briefly. */
        final Object mu = new Object();
        final Map<String, ChannelState> chans = new HashMap<>();
        RespConnection conn;
        long db;
        ScheduledFuture<?> pinger;
        boolean reconnecting;
        boolean closed;

        Node(Connector.Node addr) {
            this.addr = addr;
        }

        String channel(String key) {
            return "__keyspace@" + db + "__:" + key;
        }

        boolean watched() {
            for (ChannelState st : chans.values()) if (!st.watchers.isEmpty()) return true;
            return false;
        }

        /** The reader's push handler: an event on a channel. */
        void deliver(byte[] channel, byte[] payload) {
            String ch = new String(channel, StandardCharsets.ISO_8859_1);
            int at = ch.indexOf("__:");
            if (!ch.startsWith("__keyspace@") || at < 0) return;
            String key = ch.substring(at + 3);
            String event = new String(payload, StandardCharsets.ISO_8859_1);
            List<KeyWatch> kick = new ArrayList<>();
            synchronized (mu) {
                ChannelState st = chans.get(key);
                if (st == null) return;
                st.lastEventNanos.put(event, System.nanoTime());
                for (KeyWatch w : st.watchers) if (w.wants == null || w.wants.test(event)) kick.add(w);
            }
            for (KeyWatch w : kick) w.fire();
        }

        /** Dials and subscribes every watched channel, then tells their watchers. Called with op held. */
        void connect() {
            long timeout = router.commandTimeoutMs();
            RespConnection c = RespConnection.open(router.pool().connector(), addr, timeout);
            try {
                long db = 0;
                Object info = Futures.awaitShort(c.send(List.of(Resp.bytes("CLIENT"), Resp.bytes("INFO"))), timeout);
                if (info instanceof byte[] b) {
                    for (String f : new String(b, StandardCharsets.ISO_8859_1).trim().split(" ")) {
                        if (f.startsWith("db=")) db = Long.parseLong(f.substring(3));
                    }
                }
                c.onPush(this::deliver);
                List<String> keys = new ArrayList<>();
                synchronized (mu) {
                    if (closed) throw new IllegalStateException("hashlock is closed");
                    chans.values().removeIf(st -> st.watchers.isEmpty());
                    for (Map.Entry<String, ChannelState> e : chans.entrySet()) {
                        e.getValue().active = false;
                        keys.add(e.getKey());
                    }
                    this.db = db;
                }
                List<java.util.concurrent.CompletableFuture<Object>> confirms = new ArrayList<>();
                for (String k : keys) confirms.add(c.send(List.of(Resp.bytes("SUBSCRIBE"), channel(k).getBytes(StandardCharsets.ISO_8859_1))));
                for (java.util.concurrent.CompletableFuture<Object> f : confirms) {
                    Object r = Futures.awaitShort(f, timeout);
                    if (r instanceof Resp.ErrorReply e) throw Errors.of(e);
                }
            } catch (RuntimeException e) {
                c.close();
                throw e;
            }
            List<KeyWatch> all = new ArrayList<>();
            long now = System.nanoTime();
            synchronized (mu) {
                conn = c;
                for (ChannelState st : chans.values()) {
                    st.active = true;
                    st.activeSinceNanos = now;
                    all.addAll(st.watchers);
                }
                pinger = scheduler.scheduleWithFixedDelay(() -> offload(() -> ping(c)), PING_MS, PING_MS, TimeUnit.MILLISECONDS);
            }
            c.onLost(e -> lost(c));
            for (KeyWatch w : all) w.fire();
        }

        void offload(Runnable r) {
            try {
                workers.execute(r);
            } catch (RejectedExecutionException e) {
                // shutting down
            }
        }

        void ping(RespConnection c) {
            try {
                Futures.awaitShort(c.send(List.of(Resp.bytes("PING"))), router.commandTimeoutMs());
            } catch (ConnectionException e) {
                c.close();
                lost(c);
                return;
            }
            sweep();
        }

        /** The connection died: make it again in the background while channels are watched. */
        void lost(RespConnection c) {
            synchronized (mu) {
                if (conn != c) return;
                conn = null;
                if (pinger != null) pinger.cancel(false);
                for (ChannelState st : chans.values()) st.active = false;
                if (closed || reconnecting || !watched()) return;
                reconnecting = true;
            }
            scheduleReconnect(10);
        }

        void scheduleReconnect(long delayMs) {
            try {
                scheduler.schedule(() -> offload(() -> reconnect(delayMs)), delayMs, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException e) {
                // shutting down
            }
        }

        void reconnect(long delayMs) {
            op.lock();
            try {
                synchronized (mu) {
                    if (closed || conn != null || !watched()) {
                        reconnecting = false;
                        return;
                    }
                }
                try {
                    connect();
                    synchronized (mu) {
                        reconnecting = false;
                    }
                } catch (RuntimeException e) {
                    scheduleReconnect(Math.min(1_000, delayMs * 2));
                }
            } finally {
                op.unlock();
            }
        }

        void add(KeyWatch w, long sinceNanos) {
            op.lock();
            try {
                ChannelState st;
                RespConnection c;
                boolean active;
                long activeSince;
                boolean missed = false; // an event w wants came since its start
                synchronized (mu) {
                    if (closed) throw new IllegalStateException("hashlock is closed");
                    st = chans.computeIfAbsent(w.key, k -> new ChannelState());
                    st.watchers.add(w);
                    c = conn;
                    active = st.active;
                    activeSince = st.activeSinceNanos;
                    for (Map.Entry<String, Long> e : st.lastEventNanos.entrySet()) {
                        if (e.getValue() - sinceNanos > 0 && (w.wants == null || w.wants.test(e.getKey()))) missed = true;
                    }
                }
                if (c == null) {
                    try {
                        connect(); // subscribes every watched channel, w's too, and tells w
                    } catch (RuntimeException e) {
                        drop(w);
                        throw e;
                    }
                    return;
                }
                if (active) {
                    // Subscribed after w's start, or an event came between
                    // its start and now (delivered to no one): look once.
                    if (activeSince - sinceNanos > 0 || missed) w.fire();
                    return;
                }
                Object r;
                try {
                    r = Futures.awaitShort(c.send(List.of(Resp.bytes("SUBSCRIBE"), channel(w.key).getBytes(StandardCharsets.ISO_8859_1))),
                            router.commandTimeoutMs());
                } catch (ConnectionException e) {
                    return; // lost(): made again with this channel, w told then
                }
                if (r instanceof Resp.ErrorReply e) {
                    drop(w);
                    throw Errors.of(e);
                }
                synchronized (mu) {
                    if (conn == c) {
                        st.active = true;
                        st.activeSinceNanos = System.nanoTime();
                    }
                }
                w.fire();
            } finally {
                op.unlock();
            }
        }

        /** Forgets a watcher whose add failed. */
        void drop(KeyWatch w) {
            synchronized (mu) {
                ChannelState st = chans.get(w.key);
                if (st == null) return;
                st.watchers.remove(w);
                if (st.watchers.isEmpty() && !st.active) chans.remove(w.key);
            }
        }

        void remove(KeyWatch w) {
            synchronized (mu) {
                if (w.closed) return;
                w.closed = true;
                ChannelState st = chans.get(w.key);
                if (st == null) return;
                st.watchers.remove(w);
                if (st.watchers.isEmpty()) st.idleSinceNanos = System.nanoTime();
            }
        }

        /** Unsubscribes the channels nobody has watched for LINGER_MS. */
        void sweep() {
            op.lock();
            try {
                List<String> stale = new ArrayList<>();
                RespConnection c;
                synchronized (mu) {
                    long now = System.nanoTime();
                    chans.entrySet().removeIf(e -> {
                        ChannelState st = e.getValue();
                        boolean old = st.watchers.isEmpty() && now - st.idleSinceNanos >= LINGER_MS * 1_000_000L;
                        if (old && st.active) stale.add(e.getKey());
                        return old;
                    });
                    c = conn;
                }
                if (c == null || stale.isEmpty()) return;
                List<java.util.concurrent.CompletableFuture<Object>> fs = new ArrayList<>();
                for (String k : stale) fs.add(c.send(List.of(Resp.bytes("UNSUBSCRIBE"), channel(k).getBytes(StandardCharsets.ISO_8859_1))));
                for (java.util.concurrent.CompletableFuture<Object> f : fs) Futures.awaitShort(f, router.commandTimeoutMs());
            } catch (ConnectionException e) {
                // lost() handles it
            } finally {
                op.unlock();
            }
        }

        void close() {
            RespConnection c;
            synchronized (mu) {
                closed = true;
                c = conn;
                conn = null;
                if (pinger != null) pinger.cancel(false);
            }
            if (c != null) c.close();
        }
    }
}
