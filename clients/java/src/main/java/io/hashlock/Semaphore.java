package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Futures;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Waiter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * A counting semaphore at one key ({@code SEMAPHORE.*}), shared with
 * Redisson's {@code RSemaphore} and {@code RPermitExpirableSemaphore} on the
 * same name: the key holds the count of available permits (a missing key
 * has 0), leased permits are also recorded in {@code {name}:timeout}.
 *
 * <p>Two kinds of permits:
 * <ul>
 * <li>{@link #acquire(int)} / {@link #release(int)}: anonymous permits, as
 * {@link java.util.concurrent.Semaphore}'s and Redisson's {@code RSemaphore}'s:
 * they have no owner and come back only by a {@code release}, from anyone.
 * <li>{@link #lease(int)}: permits with ids, returned by
 * {@link Lease#close()}. By default (KEEPALIVE) they are tied to a connection
 * of the lease's own: the server renews them while it is open and returns
 * them the moment it closes, so a process that dies never keeps them.
 * </ul>
 *
 * <p>Waits queue in the server, first come first served: a head asking for 3
 * permits is not overtaken by a later waiter asking for 1, and a call that
 * does not wait never jumps the queue. Each wait has a connection of its own;
 * an interrupted wait never keeps permits (see {@link #acquire(int)} and
 * {@link #lease(int)}).
 *
 * <pre>{@code
 * Semaphore licenses = hashlock.semaphore("licenses");
 * licenses.trySetPermits(5);
 * try (Lease lease = licenses.lease(2)) {     // waits in the server's queue
 *     render(lease.ids());                    // returned on close, or by the server if this process dies
 * }
 * }</pre>
 */
public final class Semaphore {
    private final Hashlock hashlock;
    private final String name;
    private final byte[] key;
    private final LockOptions options;

    Semaphore(Hashlock hashlock, String name, LockOptions options) {
        this.hashlock = hashlock;
        this.name = name;
        this.key = Resp.bytes(name);
        this.options = options;
    }

    public String name() {
        return name;
    }

    /** The options of its leases. */
    public LockOptions options() {
        return options;
    }

    // ---- the count --------------------------------------------------------

    /** {@code SEMAPHORE.CREATE}: sets the count to {@code permits} if no semaphore exists yet (true); else changes nothing (false). */
    public boolean trySetPermits(int permits) {
        if (permits < 0) throw new IllegalArgumentException("permits must be >= 0");
        return Long.valueOf(1).equals(call(b("SEMAPHORE.CREATE"), key, b(Integer.toString(permits))));
    }

    /** As {@link #trySetPermits(int)}, the key expiring after {@code ttl}. */
    public boolean trySetPermits(int permits, Duration ttl) {
        if (permits < 0) throw new IllegalArgumentException("permits must be >= 0");
        long ms = ttl.toMillis();
        if (ms <= 0) throw new IllegalArgumentException("ttl must be positive");
        return Long.valueOf(1).equals(call(b("SEMAPHORE.CREATE"), key, b(Integer.toString(permits)), b("PX"), b(Long.toString(ms))));
    }

    /**
     * {@code SEMAPHORE.ADD}: adds {@code delta} permits (negative: removes
     * them; the count may go below 0); queued waiters are served. Returns the
     * permits available after.
     */
    public long addPermits(long delta) {
        return (Long) call(b("SEMAPHORE.ADD"), key, b(Long.toString(delta)));
    }

    /** The permits available now (0 when there is no semaphore). */
    public long availablePermits() {
        return info().map(SemaphoreInfo::available).orElse(0L);
    }

    /** {@code SEMAPHORE.INFO}; empty when neither the key nor its leases exist. */
    public Optional<SemaphoreInfo> info() {
        return Optional.ofNullable(SemaphoreInfo.parse(call(b("SEMAPHORE.INFO"), key)));
    }

    /** {@code SEMAPHORE.DRAIN}: takes every available permit; returns how many. */
    public long drainPermits() {
        return (Long) call(b("SEMAPHORE.DRAIN"), key);
    }

    // ---- anonymous permits ------------------------------------------------

    /** {@link #acquire(int)} of one permit. */
    public void acquire() throws InterruptedException {
        acquire(1);
    }

    /**
     * Takes {@code permits} anonymous permits, waiting in the server's queue
     * as long as it takes. An interrupt ends the wait: the server ends it
     * ({@code CLIENT UNBLOCK}), its answer is read, and permits it had
     * granted already are released, before InterruptedException is thrown.
     */
    public void acquire(int permits) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        while (!acquire(permits, 0L)) {
            if (Thread.interrupted()) throw new InterruptedException();
            // nil from BLOCK 0: the server ended the wait (CLIENT UNBLOCK); wait again
        }
    }

    /** Takes one permit if it is free now and nobody is queued; never waits. */
    public boolean tryAcquire() {
        return tryAcquire(1);
    }

    /** Takes {@code permits} anonymous permits if they are available now and nobody is queued; never waits. */
    public boolean tryAcquire(int permits) {
        try {
            return acquire(permits, null);
        } catch (InterruptedException e) {
            throw new AssertionError("does not wait", e);
        }
    }

    public boolean tryAcquire(long time, TimeUnit unit) throws InterruptedException {
        return tryAcquire(1, time, unit);
    }

    /** Waits up to {@code time} in the server's queue (BLOCK) for {@code permits} permits. Interrupted: as {@link #acquire(int)}. */
    public boolean tryAcquire(int permits, long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        long ms = blockMs(time, unit);
        if (ms <= 0) return tryAcquire(permits);
        return acquire(permits, ms);
    }

    /** {@link #release(int)} of one permit. */
    public long release() {
        return release(1);
    }

    /**
     * {@code SEMAPHORE.RELEASE}: gives {@code permits} anonymous permits back
     * (anyone may: they have no owner); queued waiters are served. Returns
     * the permits available after.
     */
    public long release(int permits) {
        return (Long) call(b("SEMAPHORE.RELEASE"), key, b("COUNT"), b(Integer.toString(count(permits))));
    }

    private boolean acquire(int permits, Long block) throws InterruptedException {
        if (hashlock.closed()) throw new IllegalStateException("hashlock is closed");
        List<byte[]> args = new ArrayList<>(10);
        args.add(b("SEMAPHORE.ACQUIRE"));
        args.add(key);
        args.add(b("COUNT"));
        args.add(b(Integer.toString(count(permits))));
        if (block != null) {
            args.add(b("BLOCK"));
            args.add(b(Long.toString(block)));
        }
        Tenure.addReplicas(args, options);
        if (block == null) return Errors.check(hashlock.router().call(key, args)) != null;
        long replicasMs = Tenure.replicasMs(options);
        long clientTimeout = block == 0 ? 0 : block + replicasMs + Lock.WAIT_MARGIN_MS;
        Waiter.Answer answer;
        try {
            answer = Waiter.awaitUnblocking(hashlock.router(), key, args, clientTimeout,
                    reply -> reply instanceof Long n ? List.of(b("SEMAPHORE.RELEASE"), key, b("COUNT"), b(Long.toString(n))) : null);
        } catch (Futures.ClientTimeoutException e) {
            throw new ConnectionException("semaphore " + name + ": the server did not answer the wait in time; the wait was given up", e);
        }
        hashlock.router().pool().giveBack(answer.connection());
        return Errors.check(answer.reply()) != null;
    }

    // ---- leased permits ---------------------------------------------------

    /**
     * Leases {@code permits} permits, waiting in the server's queue as long
     * as it takes. With KEEPALIVE (the default) they are tied to a connection
     * of the lease's own: renewed by the server while it is open, returned
     * the moment it closes. Without, they have the options' lease and a
     * watchdog renews them every third of it. Close the lease to return them
     * (try-with-resources).
     *
     * <p>An interrupt ends the wait in the server ({@code CLIENT UNBLOCK}),
     * its answer is read, and permits it had granted already are returned
     * ({@code SEMAPHORE.RETURN}), before InterruptedException is thrown. (The
     * wait is tied to its connection too: if the server cannot be asked, the
     * connection is closed and the server returns them.)
     */
    public Lease lease(int permits) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        while (true) {
            Lease l = lease(permits, 0L, true);
            if (l != null) return l;
            if (Thread.interrupted()) throw new InterruptedException();
        }
    }

    /** Leases {@code permits} permits if they are available now and nobody is queued; never waits. */
    public Optional<Lease> tryLease(int permits) {
        try {
            return Optional.ofNullable(lease(permits, null, false));
        } catch (InterruptedException e) {
            throw new AssertionError("not interruptible", e);
        }
    }

    /** As {@link #lease(int)}, waiting at most {@code time} (the server's BLOCK); empty if the time ran out. */
    public Optional<Lease> tryLease(int permits, long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        long ms = blockMs(time, unit);
        if (ms <= 0) return tryLease(permits);
        return Optional.ofNullable(lease(permits, ms, true));
    }

    private Lease lease(int permits, Long block, boolean interruptible) throws InterruptedException {
        boolean dedicated = options.keepalive() || block != null;
        List<byte[]> args = new ArrayList<>(14);
        args.add(b("SEMAPHORE.LEASE"));
        args.add(key);
        args.add(b("COUNT"));
        args.add(b(Integer.toString(count(permits))));
        args.add(b("PX"));
        args.add(b(Long.toString(options.leaseMs())));
        if (dedicated) args.add(b("KEEPALIVE")); // a wait is tied, so that closing it gives back a grant on its way
        if (block != null) {
            args.add(b("BLOCK"));
            args.add(b(Long.toString(block)));
        }
        Tenure.addReplicas(args, options);
        long sent = System.nanoTime();
        Waiter.Answer answer;
        if (block != null && interruptible) {
            // Only the reply names the permits: an interrupted wait is ended
            // by the server and its answer read, so that they can be returned.
            answer = Tenure.grantUnblocking(hashlock, key, args, block, Tenure.replicasMs(options), "semaphore " + name, r -> {
                if (!(r instanceof List<?> ids) || ids.isEmpty()) return null;
                List<byte[]> ret = new ArrayList<>(ids.size() + 2);
                ret.add(b("SEMAPHORE.RETURN"));
                ret.add(key);
                for (Object id : ids) ret.add((byte[]) id);
                return ret;
            });
        } else {
            answer = Tenure.grant(hashlock, key, args, block, dedicated, Tenure.replicasMs(options), interruptible, "semaphore " + name,
                    node -> {
                        // not interruptible: only a broken connection ends it, and the server returns what is tied to it
                    });
        }
        Object reply = answer.reply();
        if (reply == null || reply instanceof Resp.ErrorReply) {
            if (answer.connection() != null) hashlock.router().pool().giveBack(answer.connection());
            Errors.check(reply);
            return null;
        }
        if (!(reply instanceof List<?> l) || l.size() != permits) {
            if (answer.connection() != null) answer.connection().close(); // gives back what is tied
            throw new HashlockException("SEMAPHORE.LEASE: unexpected reply " + Resp.text(reply));
        }
        List<String> ids = new ArrayList<>(l.size());
        for (Object id : l) ids.add(Resp.text(id));
        Lease lease = new Lease(this, ids);
        lease.start(answer.connection(), answer.asking(), sent);
        return lease;
    }

    // ---- helpers ----------------------------------------------------------

    Hashlock hashlock() {
        return hashlock;
    }

    byte[] key() {
        return key;
    }

    private Object call(byte[]... args) {
        return Errors.check(hashlock.router().call(key, List.of(args)));
    }

    static long blockMs(long time, TimeUnit unit) {
        long ms = unit.toMillis(time);
        if (ms <= 0 && time > 0) ms = 1;
        return ms;
    }

    private static int count(int permits) {
        if (permits < 1) throw new IllegalArgumentException("permits must be >= 1");
        return permits;
    }

    private static byte[] b(String s) {
        return Resp.bytes(s);
    }

    /** Redisson's suffixName(name, "timeout"): {@code {name}:timeout}, or {@code name:timeout} when the name has a '{'. */
    static String timeoutKey(String name) {
        return name.contains("{") ? name + ":timeout" : "{" + name + "}:timeout";
    }

    @Override
    public String toString() {
        return "hashlock.Semaphore[" + name + "]";
    }
}
