package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.Connector;
import java.io.BufferedInputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * One connection of hashlock's own: a socket and a reader thread that
 * completes replies in order. Because a thread is always reading, the end of
 * the connection is seen the moment it happens (server shutdown,
 * {@code CLIENT KILL}, a reset, garbage on the wire), even while no command
 * is in flight: that is what {@link #onLost} reports, and what a KEEPALIVE
 * hold's loss signal listens to. No timeouts, retries or reconnects: the
 * caller decides, and {@link #close} ends everything at once (a pending
 * blocked call fails; the server drops the waiter).
 */
public final class RespConnection implements Closeable {
    private static final AtomicLong SEQ = new AtomicLong();
    /** Reader threads need little stack. */
    private static final long READER_STACK = 256 * 1024;

    private final Connector.Node node;
    private final Socket socket;
    private final OutputStream out;
    private final InputStream in;
    private final ArrayDeque<CompletableFuture<Object>> pending = new ArrayDeque<>();
    private final CopyOnWriteArrayList<Consumer<IOException>> lostListeners = new CopyOnWriteArrayList<>();
    private final Object writeLock = new Object();
    private final long serverId;
    private volatile boolean closedByUs;
    private volatile IOException failure;
    private volatile long idleSinceNanos = System.nanoTime();
    /** Set on a subscriber connection: where pub/sub messages go. */
    private volatile java.util.function.BiConsumer<byte[], byte[]> push;

    /**
     * Opens, runs the connector's handshake, reads the server's client id;
     * gives up if the server does not answer within {@code timeoutMs}.
     */
    public static RespConnection open(Connector connector, Connector.Node node, long timeoutMs) {
        Socket s;
        try {
            s = connector.connect(node);
        } catch (IOException | RuntimeException e) {
            throw new ConnectionException("cannot connect to " + node + ": " + e.getMessage(), e);
        }
        RespConnection c;
        try {
            c = new RespConnection(node, s, connector.handshake(), timeoutMs);
        } catch (IOException e) {
            closeQuietly(s);
            throw new ConnectionException("cannot connect to " + node + ": " + e.getMessage(), e);
        }
        return c;
    }

    private RespConnection(Connector.Node node, Socket socket, List<List<byte[]>> handshake, long timeoutMs) throws IOException {
        this.node = node;
        this.socket = socket;
        socket.setTcpNoDelay(true);
        socket.setKeepAlive(true);
        socket.setSoTimeout(0);
        this.out = socket.getOutputStream();
        this.in = new BufferedInputStream(socket.getInputStream(), 8192);
        Thread reader = new Thread(null, this::readLoop, "hashlock-reader-" + node + "-" + SEQ.incrementAndGet(), READER_STACK);
        reader.setDaemon(true);
        reader.start();
        List<CompletableFuture<Object>> replies = new ArrayList<>();
        for (List<byte[]> cmd : handshake) replies.add(send(cmd));
        CompletableFuture<Object> id = send(List.of(Resp.bytes("CLIENT"), Resp.bytes("ID")));
        try {
            for (CompletableFuture<Object> r : replies) {
                Object v = r.get(timeoutMs, TimeUnit.MILLISECONDS);
                if (v instanceof Resp.ErrorReply e) throw new IOException("handshake refused: " + e.message());
            }
            Object v = id.get(timeoutMs, TimeUnit.MILLISECONDS);
            this.serverId = v instanceof Long l ? l : -1;
        } catch (InterruptedException e) {
            close();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while connecting", e);
        } catch (ExecutionException | TimeoutException e) {
            close();
            throw new IOException("handshake failed: " + e.getMessage(), e);
        } catch (IOException e) {
            close();
            throw e;
        }
    }

    public Connector.Node node() {
        return node;
    }

    /** The server's id of this connection (CLIENT ID), -1 if the server would not say. */
    public long serverId() {
        return serverId;
    }

    public boolean isOpen() {
        return !closedByUs && failure == null;
    }

    /** Commands sent and not yet answered. */
    public int inFlight() {
        synchronized (writeLock) {
            return pending.size();
        }
    }

    public long idleSinceNanos() {
        return idleSinceNanos;
    }

    /** Sends one command; the future completes with its reply (ErrorReply included) or fails with ConnectionException. */
    public CompletableFuture<Object> send(List<byte[]> args) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        byte[] wire = Resp.encode(args);
        synchronized (writeLock) {
            if (!isOpen()) {
                f.completeExceptionally(closedError());
                return f;
            }
            pending.add(f);
            try {
                out.write(wire);
                out.flush();
            } catch (IOException e) {
                fail(e);
            }
        }
        return f;
    }

    /** Pipelines the commands; the futures complete in order. */
    public List<CompletableFuture<Object>> sendAll(List<List<byte[]>> commands) {
        List<CompletableFuture<Object>> fs = new ArrayList<>(commands.size());
        for (List<byte[]> c : commands) fs.add(send(c));
        return fs;
    }

    /**
     * Registers a listener called once, from the reader thread, if the
     * connection ends without {@link #close} (at once if it already has).
     */
    public void onLost(Consumer<IOException> listener) {
        lostListeners.add(listener);
        IOException f = failure;
        if (f != null && !closedByUs && lostListeners.remove(listener)) listener.accept(f);
    }

    public void removeOnLost(Consumer<IOException> listener) {
        lostListeners.remove(listener);
    }

    /**
     * Makes this a subscriber connection: from now on the pub/sub messages
     * it receives ({@code ["message", channel, payload]}) go to
     * {@code handler}, called on the reader thread (it must not block),
     * instead of being taken for replies. SUBSCRIBE/UNSUBSCRIBE
     * confirmations and PING stay replies (one per channel).
     */
    public void onPush(java.util.function.BiConsumer<byte[], byte[]> handler) {
        this.push = handler;
    }

    private static boolean isMessage(Object reply) {
        if (!(reply instanceof List<?> l) || l.size() != 3 || !(l.get(0) instanceof byte[] kind)) return false;
        String k = new String(kind, java.nio.charset.StandardCharsets.US_ASCII);
        return (k.equals("message") || k.equals("smessage")) && l.get(1) instanceof byte[] && l.get(2) instanceof byte[];
    }

    /** Closes the socket now; pending calls fail; no lost listener is called. */
    @Override
    public void close() {
        synchronized (writeLock) {
            if (closedByUs) return;
            closedByUs = true;
        }
        lostListeners.clear();
        closeQuietly(socket);
        failPending(new ConnectionException("connection to " + node + " closed by hashlock", null));
    }

    private void readLoop() {
        while (true) {
            Object reply;
            try {
                reply = Resp.read(in);
            } catch (IOException e) {
                fail(e);
                return;
            }
            java.util.function.BiConsumer<byte[], byte[]> h = push;
            if (h != null && isMessage(reply)) {
                List<?> l = (List<?>) reply;
                try {
                    h.accept((byte[]) l.get(1), (byte[]) l.get(2));
                } catch (RuntimeException ignored) {
                    // a handler's failure must not stop the reader
                }
                continue;
            }
            CompletableFuture<Object> f;
            synchronized (writeLock) {
                f = pending.poll();
                if (pending.isEmpty()) idleSinceNanos = System.nanoTime();
            }
            if (f == null) {
                fail(new Resp.ProtocolException("a reply nobody asked for: " + Resp.text(reply)));
                return;
            }
            f.complete(reply);
        }
    }

    private void fail(IOException e) {
        boolean first;
        synchronized (writeLock) {
            first = failure == null && !closedByUs;
            if (failure == null) failure = e;
        }
        closeQuietly(socket);
        failPending(closedError());
        if (first) {
            for (Consumer<IOException> l : lostListeners) {
                if (lostListeners.remove(l)) {
                    try {
                        l.accept(e);
                    } catch (RuntimeException ignored) {
                        // a listener's failure must not stop the others
                    }
                }
            }
        }
    }

    private void failPending(ConnectionException e) {
        List<CompletableFuture<Object>> fs;
        synchronized (writeLock) {
            fs = new ArrayList<>(pending);
            pending.clear();
        }
        for (CompletableFuture<Object> f : fs) f.completeExceptionally(e);
    }

    private ConnectionException closedError() {
        IOException f = failure;
        if (closedByUs && f == null) return new ConnectionException("connection to " + node + " closed by hashlock", null);
        return new ConnectionException("connection to " + node + " lost: " + (f == null ? "closed" : f.getMessage()), f);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }

    @Override
    public String toString() {
        return "RespConnection[" + node + ", id " + serverId + (isOpen() ? "" : ", closed") + "]";
    }
}
