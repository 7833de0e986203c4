package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Resp;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Permits leased from a {@link Semaphore}, each with an id
 * ({@code SEMAPHORE.LEASE}; Redisson's {@code RPermitExpirableSemaphore}
 * ids: 32 hex characters). {@link #close()} returns them
 * ({@code SEMAPHORE.RETURN}); use it with try-with-resources.
 *
 * <p>With KEEPALIVE (the default) the permits are tied to a connection of
 * the lease's own: the server renews them while it is open and returns
 * them the moment it closes (the process dies, the network goes). Without,
 * a watchdog renews their lease every third of it. {@link #signal()} fires
 * when the permits were returned other than by {@link #close()}: their
 * connection closed, their lease lapsed, someone returned their ids (a
 * Redisson client's {@code release(id)}), the semaphore was deleted.
 * A lease may be used from any thread.
 */
public final class Lease extends Tenure implements AutoCloseable {
    private final Semaphore semaphore;
    private final List<String> ids;
    private final byte[] timeoutKey;

    Lease(Semaphore semaphore, List<String> ids) {
        super(semaphore.hashlock(), semaphore.key(), semaphore.options(),
                "lease of " + ids.size() + " permit(s) of semaphore " + semaphore.name());
        this.semaphore = semaphore;
        this.ids = List.copyOf(ids);
        this.timeoutKey = Resp.bytes(Semaphore.timeoutKey(semaphore.name()));
    }

    /** The permits' ids (32 lowercase hex characters each), as Redisson's {@code RPermitExpirableSemaphore} shows them. */
    public List<String> ids() {
        return ids;
    }

    /** How many permits this lease holds. */
    public int permits() {
        return ids.size();
    }

    public Semaphore semaphore() {
        return semaphore;
    }

    /** Fires if the permits were returned other than by {@link #close()}. */
    public LossSignal signal() {
        return watch.signal();
    }

    /** True until the lease was closed or its permits lost (as this process knows it). */
    public boolean isActive() {
        return active();
    }

    /**
     * Every permit's lease from now (with KEEPALIVE: tied again to the
     * lease's connection, e.g. after a failover).
     *
     * @throws LockLostException if a permit is not leased any more
     */
    @Override
    public void renew() {
        super.renew();
    }

    /**
     * Returns the permits ({@code SEMAPHORE.RETURN}): queued waiters are
     * served. Nothing if the lease was closed already.
     *
     * @throws LockLostException if some permits were returned already
     *     other than by this lease (the others are returned all the same)
     */
    @Override
    public void close() {
        synchronized (this) {
            LockLostException lost = watch.signal().cause().orElse(null);
            if (lost != null) {
                if (ended) return;
                settle();
                throw lost;
            }
            if (ended) return;
            Object reply;
            try {
                List<byte[]> args = new ArrayList<>(ids.size() + 2);
                args.add(b("SEMAPHORE.RETURN"));
                args.add(key);
                for (String id : ids) args.add(b(id));
                reply = send(args);
            } catch (ConnectionException e) {
                if (tie == null) throw e;
                // The tied connection went during the return: the server
                // returns tied permits as their connection closes.
                end();
                return;
            } catch (LockLostException e) {
                throw lose(e);
            }
            if (reply instanceof Resp.ErrorReply e && e.code().equals("NOTOWNER")) {
                throw lose(new NotOwnerException(what() + ": some permits were not leased any more, the others were returned (" + e.message() + ")"));
            }
            Errors.check(reply);
            end();
        }
    }

    @Override
    String what() {
        return "lease of " + ids.size() + " permit(s) of semaphore " + semaphore.name();
    }

    @Override
    List<List<byte[]>> renewCommands(boolean keepalive) {
        List<List<byte[]>> cmds = new ArrayList<>(ids.size());
        for (String id : ids) {
            List<byte[]> a = new ArrayList<>(10);
            a.add(b("SEMAPHORE.RENEW"));
            a.add(key);
            a.add(b(id));
            a.add(b("PX"));
            a.add(b(Long.toString(options.leaseMs())));
            if (keepalive) a.add(b("KEEPALIVE"));
            addReplicas(a, options);
            cmds.add(a);
        }
        return cmds;
    }

    /** Every id still in {@code {name}:timeout} (the server removes an id when it is returned or lapses). */
    @Override
    void lookAtServer() {
        List<byte[]> a = new ArrayList<>(ids.size() + 2);
        a.add(b("ZMSCORE"));
        a.add(timeoutKey);
        for (String id : ids) a.add(HexFormat.of().parseHex(id));
        Object r = Errors.check(hashlock.router().call(key, a));
        if (!(r instanceof List<?> scores)) return;
        for (Object s : scores) {
            if (s == null) throw gone("a permit was returned by someone else, lapsed, or the semaphore was deleted");
        }
    }

    /** Every event but a grant ({@code semaphore.released} too: someone may have returned these ids). */
    @Override
    boolean looksAt(String event) {
        return !event.equals("semaphore.acquired");
    }

    /** Returns, one by one, the ids that are still leased. */
    @Override
    void giveBackRemains() {
        for (String id : ids) {
            try {
                hashlock.router().call(key, List.of(b("SEMAPHORE.RETURN"), key, b(id)));
            } catch (RuntimeException e) {
                return; // unreachable: the lease or the tie's close returns them
            }
        }
    }

    @Override
    public String toString() {
        return "hashlock.Lease[" + semaphore.name() + ", " + ids + (isActive() ? "" : ", ended") + "]";
    }
}
