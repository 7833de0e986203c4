package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.LockLostException;
import io.hashlock.LossReason;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

/**
 * The connection a KEEPALIVE hold is tied to: the server renews the hold
 * while it is open and releases it the moment it closes. Commands about the
 * hold go on it. When the key's slot has moved (a cluster reshard carried
 * the hold to another node, untied), the next command's {@code MOVED}/
 * {@code ASK} makes the tie follow: the hold is re-tied on a connection to
 * the new node with the primitive's re-tie commands (for a lock
 * {@code LOCK.RENEW key owner PX ms KEEPALIVE}; for a semaphore lease one
 * {@code SEMAPHORE.RENEW ... KEEPALIVE} per permit; for a multi-key lock one
 * {@code LOCK.RENEW} per key), which becomes the tie.
 */
public final class Tie {
    private final Router router;
    private final byte[] key;
    private final List<List<byte[]>> retie;
    private final BiConsumer<RespConnection, RespConnection> onSwitch;
    private RespConnection conn;
    /** After an ASK the slot is importing on our node: ASKING before every command. */
    private boolean asking;

    /**
     * @param retie a command that re-ties the hold on the connection it is
     *     sent on and answers 1 if this owner still holds it, else 0
     * @param onSwitch told (old, new) when the tie moves to another connection
     */
    public Tie(Router router, byte[] key, RespConnection conn, boolean asking, List<byte[]> retie, BiConsumer<RespConnection, RespConnection> onSwitch) {
        this(router, key, conn, asking, onSwitch, List.of(retie));
    }

    /**
     * @param retie commands that re-tie the hold on the connection they are
     *     sent on (pipelined) and each answer 1 if it is still held, else 0
     */
    public Tie(Router router, byte[] key, RespConnection conn, boolean asking, BiConsumer<RespConnection, RespConnection> onSwitch, List<List<byte[]>> retie) {
        this.router = router;
        this.key = key;
        this.conn = conn;
        this.asking = asking;
        this.retie = retie;
        this.onSwitch = onSwitch;
    }

    public synchronized RespConnection connection() {
        return conn;
    }

    /**
     * {@code args} on the tied connection: the reply (errors as ErrorReply).
     * ConnectionException when the tie broke; LockLostException when a
     * re-tie found the hold gone.
     */
    public synchronized Object call(List<byte[]> args) {
        Object reply = Futures.awaitShort(Router.send(conn, args, asking), router.commandTimeoutMs());
        for (int redirects = 0; redirects < Router.MAX_REDIRECTS; redirects++) {
            Router.Redirect r = Router.redirect(reply, conn.node());
            if (r == null) return reply;
            router.moved(r);
            follow(r);
            reply = Futures.awaitShort(Router.send(conn, args, asking), router.commandTimeoutMs());
        }
        return reply;
    }

    private void follow(Router.Redirect r) {
        for (int redirects = 0; ; redirects++) {
            RespConnection target = router.borrow(r.node());
            boolean ask = asking || r.ask();
            Object answer = null;
            try {
                // Pipelined; the first answer that is not 1 decides.
                List<CompletableFuture<Object>> fs = new ArrayList<>(retie.size());
                for (List<byte[]> cmd : retie) fs.add(Router.send(target, cmd, ask));
                for (CompletableFuture<Object> f : fs) {
                    Object a = Futures.awaitShort(f, router.commandTimeoutMs());
                    if (answer == null || Long.valueOf(1).equals(answer)) answer = a;
                }
            } catch (ConnectionException e) {
                target.close();
                throw e;
            }
            if (Long.valueOf(1).equals(answer)) {
                RespConnection old = conn;
                conn = target;
                asking = ask;
                onSwitch.accept(old, target);
                // The old node no longer has the key: nothing is tied there.
                router.pool().giveBack(old);
                return;
            }
            router.pool().giveBack(target);
            Router.Redirect again = Router.redirect(answer, target.node());
            if (again != null && redirects < Router.MAX_REDIRECTS) {
                router.moved(again);
                r = again;
                continue;
            }
            if (answer instanceof Resp.ErrorReply e) throw Errors.of(e);
            throw new LockLostException(LossReason.NOT_HELD, "the hold was gone when its key's slot moved to " + r.node());
        }
    }

    /** The hold is over: the connection holds nothing and goes back to the pool. */
    public synchronized void giveBack() {
        router.pool().giveBack(conn);
    }

    /** Closes the connection (the server releases what is tied to it). */
    public synchronized void close() {
        conn.close();
    }
}
