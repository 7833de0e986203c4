package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.Connector;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A blocking command (LOCK.ACQUIRE ... BLOCK, and later SEMAPHORE.ACQUIRE,
 * LATCH.AWAIT, ...) on a pooled connection of its own.
 *
 * <p>An answer from the server (a grant, or nil at the server's timeout)
 * leaves the connection clean: the caller keeps it (a KEEPALIVE grant is
 * tied to it) or gives it back to the pool. A wait that ends on the client
 * side — interrupted, or no answer within the client's limit, or a broken
 * connection — closes the connection, so the server drops the waiter; then,
 * once the server has let go of that connection ({@code CLIENT LIST ID}
 * shows it gone), {@link GiveBack} returns whatever may have been granted on
 * it in a reply nobody read. Only after that does the caller see the
 * {@link InterruptedException} (or timeout), so a cancelled waiter is never
 * left holding anything.
 */
public final class Waiter {
    private Waiter() {}

    /** Returns what a cancelled wait may have been granted (e.g. LOCK.RELEASE key owner), starting at {@code node}. */
    @FunctionalInterface
    public interface GiveBack {
        void giveBack(Connector.Node node);
    }

    /**
     * The server's answer and the connection it came on; {@code asking}: the
     * command went with ASKING (the key's slot is being imported by that node).
     */
    public record Answer(RespConnection connection, Object reply, boolean asking) {}

    /** How long to wait for the server to drop an abandoned connection. */
    private static final long GONE_TIMEOUT_MS = 5_000;

    /**
     * Runs {@code cmd} for {@code key}; {@code clientTimeoutMs} ≤ 0 waits as
     * long as the server does. Redirects (MOVED/ASK) re-issue the wait on
     * the new node, at the tail of its queue.
     */
    public static Answer await(Router router, byte[] key, List<byte[]> cmd, long clientTimeoutMs, boolean interruptible, GiveBack giveBack)
            throws InterruptedException, Futures.ClientTimeoutException {
        Connector.Node node = router.nodeFor(key);
        boolean asking = false;
        for (int redirects = 0; ; redirects++) {
            RespConnection c = router.borrow(node);
            CompletableFuture<Object> f = Router.send(c, cmd, asking);
            Object reply;
            try {
                reply = Futures.await(f, clientTimeoutMs, interruptible);
            } catch (InterruptedException | Futures.ClientTimeoutException | ConnectionException e) {
                abandon(router, c, giveBack);
                throw e;
            }
            Router.Redirect r = Router.redirect(reply, node);
            if (r == null || redirects >= Router.MAX_REDIRECTS) return new Answer(c, reply, asking);
            router.pool().giveBack(c);
            router.moved(r);
            node = r.node();
            asking = r.ask();
        }
    }

    /** What to send, on the wait's own connection, to give back what {@code reply} granted (null: nothing). */
    @FunctionalInterface
    public interface Undo {
        List<byte[]> undo(Object reply);
    }

    /**
     * As {@link #await}, for a grant that cannot be tied to the connection
     * (anonymous semaphore permits: closing the connection would not give
     * them back, and nothing else tells whether they were granted). An
     * interrupted wait is ended by the server instead ({@code CLIENT
     * UNBLOCK} from another connection, repeated until the wait's answer
     * arrives: the unblock may overtake the command), its answer is read,
     * and what it granted is given back ({@code undo}) before the
     * InterruptedException is thrown. Only when the server cannot be asked
     * (no answer within a few seconds, or {@code CLIENT UNBLOCK} refused by
     * an ACL) is the connection closed instead, and a grant that was made
     * then cannot be given back.
     */
    public static Answer awaitUnblocking(Router router, byte[] key, List<byte[]> cmd, long clientTimeoutMs, Undo undo)
            throws InterruptedException, Futures.ClientTimeoutException {
        Connector.Node node = router.nodeFor(key);
        boolean asking = false;
        for (int redirects = 0; ; redirects++) {
            RespConnection c = router.borrow(node);
            CompletableFuture<Object> f = Router.send(c, cmd, asking);
            Object reply;
            try {
                reply = Futures.await(f, clientTimeoutMs, true);
            } catch (InterruptedException e) {
                unblock(router, c, f, undo);
                throw e;
            } catch (Futures.ClientTimeoutException | ConnectionException e) {
                c.close(); // the server is not answering: nothing more can be learnt
                throw e;
            }
            Router.Redirect r = Router.redirect(reply, node);
            if (r == null || redirects >= Router.MAX_REDIRECTS) return new Answer(c, reply, asking);
            router.pool().giveBack(c);
            router.moved(r);
            node = r.node();
            asking = r.ask();
        }
    }

    /** Ends the wait on {@code c} in the server, reads its answer and undoes what it granted. */
    private static void unblock(Router router, RespConnection c, CompletableFuture<Object> f, Undo undo) {
        boolean interrupted = Thread.interrupted();
        try {
            long deadline = System.nanoTime() + GONE_TIMEOUT_MS * 1_000_000L;
            List<byte[]> unblock = List.of(Resp.bytes("CLIENT"), Resp.bytes("UNBLOCK"), Resp.bytes(Long.toString(c.serverId())));
            while (!f.isDone() && c.serverId() >= 0 && System.nanoTime() < deadline) {
                RespConnection probe = router.borrow(c.node());
                Object r;
                try {
                    r = Futures.awaitShort(probe.send(unblock), router.commandTimeoutMs());
                } catch (ConnectionException e) {
                    probe.close();
                    break;
                }
                router.pool().giveBack(probe);
                if (r instanceof Resp.ErrorReply) break; // e.g. NOPERM
                try {
                    // 1: unblocked, its answer is on its way; 0: not blocked (yet, or answered already).
                    f.get(Long.valueOf(1).equals(r) ? 1_000 : 2, java.util.concurrent.TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                    // not answered yet (or the connection failed: f is done)
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            Object reply;
            try {
                reply = f.getNow(null);
            } catch (RuntimeException e) {
                c.close(); // the connection failed: nothing was read
                return;
            }
            if (!f.isDone()) {
                c.close(); // the server did not say: closing drops the waiter at least
                return;
            }
            List<byte[]> u = reply instanceof Resp.ErrorReply ? null : undo.undo(reply);
            if (u != null) {
                Object r = Futures.awaitShort(c.send(u), router.commandTimeoutMs());
                if (r instanceof Resp.ErrorReply) {
                    c.close();
                    return;
                }
            }
            router.pool().giveBack(c);
        } catch (RuntimeException e) {
            c.close(); // best effort
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /**
     * Closes {@code c} and, once the server no longer knows it, gives back
     * what may have been granted on it. Runs with the interrupt flag
     * cleared (and restores it), bounded in time; the lease is the last
     * safety net if the server cannot be reached.
     */
    public static void abandon(Router router, RespConnection c, GiveBack giveBack) {
        c.close();
        boolean interrupted = Thread.interrupted();
        try {
            boolean gone = awaitGone(router, c);
            giveBack.giveBack(c.node());
            if (!gone) {
                // Could not see the server drop it: give back once more
                // after the server has surely processed the close.
                sleep(100);
                giveBack.giveBack(c.node());
            }
        } catch (RuntimeException e) {
            // best effort: the server unreachable; the lease ends the hold
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /** True once the server lists no client with c's id; false if it cannot tell. */
    private static boolean awaitGone(Router router, RespConnection c) {
        if (c.serverId() < 0) return false;
        long deadline = System.nanoTime() + GONE_TIMEOUT_MS * 1_000_000L;
        List<byte[]> list = List.of(Resp.bytes("CLIENT"), Resp.bytes("LIST"), Resp.bytes("ID"), Resp.bytes(Long.toString(c.serverId())));
        while (System.nanoTime() < deadline) {
            RespConnection probe = router.borrow(c.node());
            Object reply;
            try {
                reply = Futures.awaitShort(probe.send(list), router.commandTimeoutMs());
            } catch (ConnectionException e) {
                probe.close();
                return false;
            }
            router.pool().giveBack(probe);
            if (reply instanceof Resp.ErrorReply) return false; // e.g. NOPERM
            if (reply instanceof byte[] b && b.length == 0) return true;
            if (reply == null) return true;
            sleep(1);
        }
        return false;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
