package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Futures;
import io.hashlock.internal.Resp;
import io.hashlock.internal.RespConnection;
import io.hashlock.internal.Subscriber;
import io.hashlock.internal.Tie;
import io.hashlock.internal.Waiter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.RejectedExecutionException;

/**
 * One holding period of a family object (a semaphore lease, an owner's holds
 * of a read-write lock, a multi-key lock): from the grant to the release that
 * ends it, or its loss. What every holder shares lives here — the tie to a
 * connection (KEEPALIVE) that follows its key's slot, the {@link Watch} with
 * its {@link LossSignal}, the periodic check (KEEPALIVE: a re-tying renewal
 * on the tie; watchdog: a renewal every third of the lease), the look at
 * each lifecycle event, and the end (clean: the connection back to the pool;
 * lost: the signal fires, what may remain on the server is given back). A
 * primitive says only which commands renew its holds, how to look at them
 * without changing anything, and how to give them back.
 *
 * <p>Touched by its owner and by the watch's checks, under its monitor.
 */
abstract class Tenure {
    final Hashlock hashlock;
    /** The key commands are routed by (a multi-key lock's first key). */
    final byte[] key;
    final LockOptions options;
    final Watch watch;
    /** KEEPALIVE: the connection the holds are tied to. */
    Tie tie;
    /** Watchdog: the lease ends no earlier than this (client clock, from the invocation). */
    long validUntilNanos;
    long lastRenewNanos = System.nanoTime();
    boolean ended;

    Tenure(Hashlock hashlock, byte[] key, LockOptions options, String what) {
        this.hashlock = hashlock;
        this.key = key;
        this.options = options;
        this.watch = new Watch(hashlock, new LossSignal(), what);
    }

    /** "lease of 2 permits of semaphore s": for messages. */
    abstract String what();

    /** Commands that renew every hold of this tenure (KEEPALIVE: and tie it to the connection they go on); each answers 1 while held. */
    abstract List<List<byte[]>> renewCommands(boolean keepalive);

    /** A read-only look at the server: throws {@link LockLostException} if the holds are gone. */
    abstract void lookAtServer();

    /** Whether a lifecycle event on one of {@link #eventKeys()} makes the tenure look (events that announce an end). */
    abstract boolean looksAt(String event);

    /** After a loss: gives back, best effort, whatever may remain held on the server. */
    abstract void giveBackRemains();

    /** The keys whose keyspace events are watched. */
    List<byte[]> eventKeys() {
        return List.of(key);
    }

    // ---- acquiring (helpers for the primitives) ---------------------------

    /**
     * Sends a grant command: at once and routed ({@code dedicated} false: it
     * cannot be abandoned), or on a pooled connection of its own ({@code
     * dedicated}: a wait, or a grant tied to the connection with KEEPALIVE).
     * An interrupted (or failed) wait closes its connection, so the server
     * drops the waiter; then, once the server no longer lists the
     * connection, {@code giveBack} returns what may have been granted on it
     * in a reply nobody read (the server takes an undelivered grant back
     * itself, but a moment after the connection is gone), before
     * InterruptedException is thrown.
     *
     * @param block null: answer at once; 0: wait forever; else BLOCK ms
     */
    static Waiter.Answer grant(Hashlock h, byte[] key, List<byte[]> args, Long block, boolean dedicated, long replicasMs,
            boolean interruptible, String what, Waiter.GiveBack giveBack) throws InterruptedException {
        if (h.closed()) throw new IllegalStateException("hashlock is closed");
        if (!dedicated) return new Waiter.Answer(null, h.router().call(key, args), false);
        try {
            return Waiter.await(h.router(), key, args, clientTimeout(h, block, replicasMs), interruptible, giveBack);
        } catch (Futures.ClientTimeoutException e) {
            throw new ConnectionException(what + ": the server did not answer the wait in time; the wait was given up", e);
        }
    }

    /**
     * As {@link #grant}, for a grant that only its reply identifies (leased
     * permit ids): an interrupted wait is ended by the server ({@code CLIENT
     * UNBLOCK}), its answer read, and {@code undo} gives back what it granted
     * before InterruptedException is thrown ({@link Waiter#awaitUnblocking}).
     */
    static Waiter.Answer grantUnblocking(Hashlock h, byte[] key, List<byte[]> args, Long block, long replicasMs, String what,
            Waiter.Undo undo) throws InterruptedException {
        if (h.closed()) throw new IllegalStateException("hashlock is closed");
        try {
            return Waiter.awaitUnblocking(h.router(), key, args, clientTimeout(h, block, replicasMs), undo);
        } catch (Futures.ClientTimeoutException e) {
            throw new ConnectionException(what + ": the server did not answer the wait in time; the wait was given up", e);
        }
    }

    private static long clientTimeout(Hashlock h, Long block, long replicasMs) {
        return block == null
                ? h.router().commandTimeoutMs() + replicasMs
                : block == 0 ? 0 : block + replicasMs + Lock.WAIT_MARGIN_MS;
    }

    static long replicasMs(LockOptions o) {
        return o.replicas() > 0 ? o.replicasTimeoutMs() : 0;
    }

    /** REPLICAS n ms, when the options ask for it. */
    static void addReplicas(List<byte[]> a, LockOptions o) {
        if (o.replicas() >= 0) {
            a.add(b("REPLICAS"));
            a.add(b(Integer.toString(o.replicas())));
            a.add(b(Long.toString(o.replicasTimeoutMs())));
        }
    }

    static byte[] b(String s) {
        return Resp.bytes(s);
    }

    /**
     * Starts the tenure on its grant. {@code conn}: the connection the grant
     * came on (null: a routed call), tied to it; with KEEPALIVE it becomes
     * the tie, else it is untied ({@link #renewCommands} without KEEPALIVE)
     * and goes back to the pool.
     *
     * @throws LockLostException if untying found the holds gone already
     */
    void start(RespConnection conn, boolean asking, long sentNanos) {
        synchronized (this) {
            validUntilNanos = System.nanoTime() + options.leaseMs() * 1_000_000L;
            if (options.keepalive()) {
                tie = new Tie(hashlock.router(), key, conn, asking, (old, neu) -> {
                    watch.connection(neu);
                    // The key's events come from the new node now.
                    if (options.events()) subscribe(System.nanoTime());
                }, renewCommands(true));
                watch.connection(conn);
            } else if (conn != null) {
                // Tied for the wait only: a plain lease from here on.
                try {
                    for (List<byte[]> cmd : renewCommands(false)) {
                        Object r = Errors.check(Futures.awaitShort(conn.send(cmd), hashlock.router().commandTimeoutMs()));
                        if (!Long.valueOf(1).equals(r)) {
                            conn.close(); // gives back what is still tied
                            ended = true;
                            throw gone("it was gone right after the grant");
                        }
                    }
                } catch (HashlockException e) {
                    conn.close();
                    ended = true;
                    throw e;
                }
                hashlock.router().pool().giveBack(conn);
            }
            hashlock.tenures().add(this);
            startChecks();
        }
        if (options.events()) subscribe(sentNanos);
    }

    void startChecks() {
        long period = Math.max(1, Math.min(options.checkIntervalMs(), options.leaseMs() / 3));
        watch.poll(period, options.keepalive() ? this::checkTied : () -> checkWatchdog(period));
    }

    /** Watches the keys' lifecycle events in the background; an ending event makes the tenure look at once. */
    void subscribe(long sentNanos) {
        try {
            hashlock.workers().execute(() -> {
                if (watch.stopped()) return;
                List<Subscriber.KeyWatch> ws = new ArrayList<>();
                try {
                    for (byte[] k : eventKeys()) {
                        ws.add(hashlock.subscriber().watch(k, sentNanos, this::looksAt, () -> watch.look(this::look)));
                    }
                } catch (RuntimeException e) {
                    // no subscription: the periodic check finds a loss alone
                }
                watch.events(ws);
            });
        } catch (RejectedExecutionException e) {
            // hashlock is closing
        }
    }

    /** True until the tenure ended (released, lost, settled). */
    synchronized boolean active() {
        return !ended && !watch.signal().isLost();
    }

    /** At an event: still held? (A look, not a renewal.) */
    private void look() {
        synchronized (this) {
            if (ended) return;
            try {
                lookAtServer();
            } catch (ConnectionException e) {
                if (tie != null && !tie.connection().isOpen()) throw connectionLost(e);
            }
        }
    }

    /** KEEPALIVE: still held, and still tied? The renewals on the tie re-tie what lost its tie (failover, slot moved). */
    private void checkTied() {
        synchronized (this) {
            if (ended) return;
            try {
                for (List<byte[]> cmd : renewCommands(true)) {
                    Object r = Errors.check(tie.call(cmd));
                    if (!Long.valueOf(1).equals(r)) throw gone("a check found it gone");
                }
            } catch (ConnectionException e) {
                // The tie is the connection: without it the server gave the holds back.
                throw connectionLost(e);
            }
        }
    }

    /** Watchdog: renews every third of the lease, looks in between. */
    private void checkWatchdog(long period) {
        synchronized (this) {
            if (ended) return;
            long now = System.nanoTime();
            boolean renewDue = now - lastRenewNanos >= (options.leaseMs() / 3 - period / 2) * 1_000_000L;
            try {
                if (renewDue) {
                    long invoked = System.nanoTime();
                    for (List<byte[]> cmd : renewCommands(false)) {
                        Object r = Errors.check(hashlock.router().call(key, cmd));
                        if (!Long.valueOf(1).equals(r)) throw gone("the watchdog's renewal found it gone");
                    }
                    lastRenewNanos = invoked;
                    validUntilNanos = invoked + options.leaseMs() * 1_000_000L;
                } else {
                    lookAtServer();
                }
            } catch (LockLostException e) {
                throw e;
            } catch (HashlockException e) {
                if (System.nanoTime() - validUntilNanos >= 0) {
                    throw new LockLostException(LossReason.RENEWAL_FAILED,
                            what() + ": its lease ran out before the watchdog could renew it (" + e.getMessage() + ")", e);
                }
            }
        }
    }

    /** The owner's renewal: every hold's lease from now (KEEPALIVE: tied again); lost if any is gone. */
    void renew() {
        synchronized (this) {
            watch.signal().throwIfLost();
            if (ended) throw gone("it was released");
            try {
                long invoked = System.nanoTime();
                for (List<byte[]> cmd : renewCommands(options.keepalive())) {
                    Object r = Errors.check(send(cmd));
                    if (!Long.valueOf(1).equals(r)) throw lose(gone("a renewal found it gone"));
                }
                lastRenewNanos = invoked;
                validUntilNanos = invoked + options.leaseMs() * 1_000_000L;
            } catch (ConnectionException e) {
                if (tie == null) throw e;
                throw lose(connectionLost(e));
            } catch (LockLostException e) {
                throw lose(e);
            }
        }
    }

    LockLostException gone(String why) {
        return new LockLostException(LossReason.NOT_HELD, what() + " is no longer held: " + why);
    }

    LockLostException connectionLost(ConnectionException e) {
        return new LockLostException(LossReason.CONNECTION_LOST, what() + ": its KEEPALIVE connection failed (" + e.getMessage() + ")", e);
    }

    /** Sends a command about this tenure: on the tie (KEEPALIVE) or routed. */
    Object send(List<byte[]> args) {
        if (tie != null) return tie.call(args);
        return hashlock.router().call(key, args);
    }

    /** The tenure ended cleanly: stop watching, the connection goes back to the pool. */
    void end() {
        ended = true;
        watch.stop();
        if (tie != null) tie.giveBack();
        hashlock.tenures().remove(this);
        forget();
    }

    /** Called when the tenure ends, cleanly or not: drop it from wherever its owner finds it. */
    void forget() {}

    /** The tenure is lost: the signal fires, what may remain is given back; returns the loss to throw. */
    LockLostException lose(LockLostException e) {
        watch.stop();
        watch.signal().fire(e);
        settle();
        return watch.signal().cause().orElse(e);
    }

    /**
     * Clears a lost tenure: gives back what may remain on the server, and
     * closes the tie (the server gives back what is still tied to it).
     */
    void settle() {
        synchronized (this) {
            if (ended) return;
            ended = true;
            watch.stop();
            hashlock.tenures().remove(this);
            forget();
            try {
                giveBackRemains();
            } catch (RuntimeException e) {
                // best effort: the lease (or the tie's close) ends the rest
            }
            if (tie != null) tie.close();
        }
    }

    /** hashlock is closing: close the tie (the server gives back what is tied), fire the signal. */
    void abandon(String why) {
        synchronized (this) {
            if (ended) return;
            ended = true;
            watch.stop();
            if (tie != null) tie.close();
            watch.signal().fire(new LockLostException(LossReason.CONNECTION_LOST, what() + ": " + why));
        }
    }
}
