package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Futures;
import io.hashlock.internal.Resp;
import io.hashlock.internal.RespConnection;
import io.hashlock.internal.Router;
import io.hashlock.internal.Tie;
import io.hashlock.internal.Waiter;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;

/**
 * A reentrant lock on one key, shared with every {@code LOCK.*} client and
 * with Redisson's {@code RLock}/{@code RFencedLock} on the same name.
 *
 * <p>Like {@link java.util.concurrent.locks.ReentrantLock} (and Redisson's
 * RLock) it is held by a thread: the owner id is
 * {@code <Hashlock id>:<thread id>}, one Lock object may be shared by
 * threads, and each thread re-enters only its own holds. Waiting happens in
 * the server's FIFO queue, on a connection of the wait's own.
 *
 * <p>By default (KEEPALIVE) the lock is tied to a pooled connection for as
 * long as it is held: the server renews the lease while that connection is
 * open and releases the lock the moment it closes (the process dies, the
 * network goes). A lock released cleanly gives its connection back to the
 * pool. {@link #signal()} tells the holder when its hold is lost.
 *
 * <pre>{@code
 * Lock lock = hashlock.lock("orders:42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {   // waits up to 5 s in the server's queue
 *     try {
 *         shipOrder(42);                     // the server keeps the lease alive
 *     } finally {
 *         lock.unlock();                     // LockLostException if it was lost meanwhile
 *     }
 * }
 * }</pre>
 */
public final class Lock implements java.util.concurrent.locks.Lock {
    /** How much longer than BLOCK a waiter waits for the server's answer before it gives up. */
    static final long WAIT_MARGIN_MS = 10_000;

    private final Hashlock hashlock;
    private final String name;
    private final byte[] key;
    private final LockOptions options;
    /** An owner for every thread (an election's candidate id); null: {@code <id>:<thread id>}. */
    private final String fixedOwner;

    Lock(Hashlock hashlock, String name, LockOptions options, String fixedOwner) {
        this.hashlock = hashlock;
        this.name = name;
        this.key = Resp.bytes(name);
        this.options = options;
        this.fixedOwner = fixedOwner;
    }

    public String name() {
        return name;
    }

    public LockOptions options() {
        return options;
    }

    /** The calling thread's owner id: {@code <Hashlock id>:<thread id>}, as Redisson writes it. */
    public String owner() {
        if (fixedOwner != null) return fixedOwner;
        return hashlock.id() + ":" + Thread.currentThread().getId();
    }

    // ---- java.util.concurrent.locks.Lock ----------------------------------

    /**
     * Waits in the server's queue as long as it takes. Interrupts do not end
     * the wait (the interrupt status is set again on return), as with
     * {@link java.util.concurrent.locks.ReentrantLock#lock()}.
     *
     * @throws ConnectionException if the server cannot be reached
     */
    @Override
    public void lock() {
        try {
            while (!acquire(0L, false)) {
                // nil from BLOCK 0: the server ended the wait (CLIENT UNBLOCK); wait again
            }
        } catch (InterruptedException e) {
            throw new AssertionError("not interruptible", e);
        }
    }

    /**
     * Waits in the server's queue until granted or interrupted. An
     * interrupted wait closes its connection (the server drops the waiter)
     * and gives back a grant that was already on its way, before
     * InterruptedException is thrown: an abandoned waiter never holds the lock.
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        while (!acquire(0L, true)) {
            if (Thread.interrupted()) throw new InterruptedException();
        }
    }

    /** Takes the lock (or re-enters it) if it is free now; never waits. */
    @Override
    public boolean tryLock() {
        try {
            return acquire(null, false);
        } catch (InterruptedException e) {
            throw new AssertionError("not interruptible", e);
        }
    }

    /**
     * Waits up to {@code time} in the server's queue (the server ends the
     * wait: BLOCK). Interrupted: as {@link #lockInterruptibly()}.
     */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) throw new InterruptedException();
        long ms = unit.toMillis(time);
        if (ms <= 0 && time > 0) ms = 1;
        if (ms <= 0) return tryLock();
        return acquire(ms, true);
    }

    /**
     * Drops one hold of the calling thread; at the last one the lock is free
     * (the next waiter has it) and its connection goes back to the pool.
     *
     * @throws IllegalMonitorStateException if the calling thread holds nothing here
     * @throws LockLostException if the hold was lost before this call (lease
     *     lapsed, force-released, its connection closed): what it protected
     *     may have been touched by someone else. The hold is over either way.
     */
    @Override
    public void unlock() {
        Hold h = currentHold();
        if (h == null) throw new IllegalMonitorStateException("lock " + name + " is not held by " + owner());
        h.release();
    }

    /** Not supported (Redisson's RLock does not support it either). */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("hashlock locks have no conditions");
    }

    // ---- beyond java.util.concurrent.locks.Lock ----------------------------

    /**
     * The fencing token of the calling thread's latest acquisition (re-entry
     * included); it grows with every acquisition of this lock by anyone, and
     * is shared with Redisson's RFencedLock. Pass it to what you protect.
     *
     * @throws IllegalStateException without {@link LockOptions.Builder#token(boolean) token(true)}
     * @throws IllegalMonitorStateException if the calling thread does not hold the lock
     */
    public long token() {
        Hold h = currentHold();
        if (h == null) throw new IllegalMonitorStateException("lock " + name + " is not held by " + owner());
        if (!h.options.token()) throw new IllegalStateException("lock " + name + " was taken without TOKEN: LockOptions.builder().token(true)");
        return h.token;
    }

    /**
     * The loss signal of the calling thread's hold: it fires if the hold ends
     * other than by {@link #unlock()}.
     *
     * @throws IllegalMonitorStateException if the calling thread does not hold the lock
     */
    public LossSignal signal() {
        Hold h = currentHold();
        if (h == null) throw new IllegalMonitorStateException("lock " + name + " is not held by " + owner());
        return h.watch.signal();
    }

    /** The calling thread's holds taken through hashlock and not released (0 = none). */
    public int holdCount() {
        Hold h = currentHold();
        return h == null ? 0 : h.count;
    }

    /** True if the calling thread's owner holds the lock now (asks the server). */
    public boolean isHeldByCurrentThread() {
        return info().map(i -> i.owner().equals(owner())).orElse(false);
    }

    /** True if anyone holds the lock now (asks the server). */
    public boolean isLocked() {
        return info().isPresent();
    }

    /** {@code LOCK.INFO}; empty when the lock is free. */
    public Optional<LockInfo> info() {
        return Optional.ofNullable(parseInfo(Errors.check(hashlock.router().call(key, List.of(b("LOCK.INFO"), key)))));
    }

    /**
     * {@code LOCK.FORCERELEASE}: frees the lock whoever holds it (Redisson's
     * {@code forceUnlock}); the holder's loss signal fires. True if a lock was removed.
     */
    public boolean forceUnlock() {
        return Long.valueOf(1).equals(Errors.check(hashlock.router().call(key, List.of(b("LOCK.FORCERELEASE"), key))));
    }

    /**
     * Sets the lease to the configured one from now; with KEEPALIVE it also
     * ties the lock to its connection again (e.g. after a failover, where
     * the tie did not follow).
     *
     * @throws LockLostException if the calling thread's hold is gone
     */
    public void renew() {
        Hold h = currentHold();
        if (h == null) throw new IllegalMonitorStateException("lock " + name + " is not held by " + owner());
        h.renew();
    }

    @Override
    public String toString() {
        return "hashlock.Lock[" + name + ", " + options + "]";
    }

    // ---- acquiring ------------------------------------------------------

    Hold currentHold() {
        Hold h = hashlock.holds().get(new Hashlock.HoldKey(name, owner()));
        return h == null || h.count == 0 ? null : h;
    }

    /**
     * @param block null: answer at once; 0: wait forever; else BLOCK ms
     */
    private boolean acquire(Long block, boolean interruptible) throws InterruptedException {
        if (hashlock.closed()) throw new IllegalStateException("hashlock is closed");
        String owner = owner();
        Hashlock.HoldKey hk = new Hashlock.HoldKey(name, owner);
        Hold held = hashlock.holds().get(hk);
        if (held != null) {
            if (held.count > 0 && !held.watch.signal().isLost()) {
                held.reenter();
                return true;
            }
            // A hold that was lost in the background: settle it first (in
            // this thread, so nothing released later can be a new hold).
            held.settle();
        }
        byte[] ownerBytes = b(owner);
        List<byte[]> args = acquireArgs(ownerBytes, block);
        Object reply;
        RespConnection conn = null;
        boolean asking = false;
        long sentNanos = System.nanoTime();
        if (options.keepalive() || block != null) {
            long clientTimeout = block == null
                    ? hashlock.router().commandTimeoutMs() + replicasMs()
                    : block == 0 ? 0 : block + replicasMs() + WAIT_MARGIN_MS;
            Waiter.Answer answer;
            try {
                answer = Waiter.await(hashlock.router(), key, args, clientTimeout, interruptible,
                        node -> giveBackFrom(node, ownerBytes));
            } catch (Futures.ClientTimeoutException e) {
                throw new ConnectionException("lock " + name + ": the server did not answer the wait in time; the wait was given up", e);
            }
            conn = answer.connection();
            reply = answer.reply();
            asking = answer.asking();
        } else {
            reply = hashlock.router().call(key, args);
        }
        long[] got;
        try {
            got = parseAcquire(Errors.check(reply));
        } catch (RuntimeException e) {
            if (conn != null) hashlock.router().pool().giveBack(conn);
            throw e;
        }
        if (got == null) {
            if (conn != null) hashlock.router().pool().giveBack(conn);
            return false;
        }
        Hold h = new Hold(owner, ownerBytes, options);
        h.count = 1;
        h.serverCount = got[0];
        h.token = got[1];
        h.validUntilNanos = System.nanoTime() + options.leaseMs() * 1_000_000L;
        if (options.keepalive()) {
            h.tie = new Tie(hashlock.router(), key, conn, asking, renewArgs(ownerBytes, true, options), (old, neu) -> {
                h.watch.connection(neu);
                // The key's events come from the new node now.
                if (options.events()) h.subscribe(System.nanoTime());
            });
            h.watch.connection(conn);
        } else if (conn != null) {
            hashlock.router().pool().giveBack(conn);
        }
        hashlock.holds().put(hk, h);
        h.startChecks();
        if (options.events()) h.subscribe(sentNanos);
        return true;
    }

    /** Gives back a grant that may have reached an abandoned waiter. */
    private void giveBackFrom(io.hashlock.Connector.Node node, byte[] owner) {
        Object r = hashlock.router().callFrom(node, key, List.of(b("LOCK.RELEASE"), key, owner));
        if (r instanceof Long) hashlock.countGivenBack();
    }

    private long replicasMs() {
        return options.replicas() > 0 ? options.replicasTimeoutMs() : 0;
    }

    private List<byte[]> acquireArgs(byte[] owner, Long block) {
        List<byte[]> a = new ArrayList<>(12);
        a.add(b("LOCK.ACQUIRE"));
        a.add(key);
        a.add(owner);
        a.add(b("PX"));
        a.add(b(Long.toString(options.leaseMs())));
        if (block != null) {
            a.add(b("BLOCK"));
            a.add(b(Long.toString(block)));
        }
        if (options.keepalive()) a.add(b("KEEPALIVE"));
        if (options.token()) a.add(b("TOKEN"));
        addReplicas(a, options);
        return a;
    }

    private List<byte[]> renewArgs(byte[] owner, boolean keepalive, LockOptions o) {
        List<byte[]> a = new ArrayList<>(10);
        a.add(b("LOCK.RENEW"));
        a.add(key);
        a.add(owner);
        a.add(b("PX"));
        a.add(b(Long.toString(o.leaseMs())));
        if (keepalive) a.add(b("KEEPALIVE"));
        addReplicas(a, o);
        return a;
    }

    private static void addReplicas(List<byte[]> a, LockOptions o) {
        if (o.replicas() >= 0) {
            a.add(b("REPLICAS"));
            a.add(b(Integer.toString(o.replicas())));
            a.add(b(Long.toString(o.replicasTimeoutMs())));
        }
    }

    /** [hold count, token] or null when not granted. */
    private long[] parseAcquire(Object reply) {
        if (reply == null) return null;
        if (reply instanceof Long n) return new long[] {n, 0};
        if (reply instanceof List<?> l && l.size() == 2 && l.get(0) instanceof Long n && l.get(1) instanceof Long t) return new long[] {n, t};
        throw new HashlockException("LOCK.ACQUIRE: unexpected reply " + Resp.text(reply));
    }

    static LockInfo parseInfo(Object reply) {
        if (reply == null) return null;
        if (!(reply instanceof List<?> l)) throw new HashlockException("LOCK.INFO: unexpected reply " + Resp.text(reply));
        String owner = null;
        long holds = 0;
        long ttl = 0;
        long waiters = 0;
        long keepalive = 0;
        long token = 0;
        for (int i = 0; i + 1 < l.size(); i += 2) {
            String f = Resp.text(l.get(i));
            Object v = l.get(i + 1);
            switch (f) {
                case "owner" -> owner = Resp.text(v);
                case "holds" -> holds = (Long) v;
                case "ttl" -> ttl = (Long) v;
                case "waiters" -> waiters = (Long) v;
                case "keepalive" -> keepalive = (Long) v;
                case "token" -> token = (Long) v;
                default -> {
                    // fields are only ever appended
                }
            }
        }
        return new LockInfo(owner, holds, ttl, waiters, keepalive == 1, token);
    }

    private static byte[] b(String s) {
        return Resp.bytes(s);
    }

    // ---- one thread's hold --------------------------------------------------

    /**
     * One owner's hold of this lock, from the acquisition that took it to
     * the release that gave it up (or its loss). Touched by its owner's
     * thread and by the watch's checks, under its monitor.
     */
    final class Hold {
        final String owner;
        final byte[] ownerBytes;
        final LockOptions options;
        final Watch watch;
        /** Holds taken through hashlock by this owner and not released. */
        int count;
        /** The server's hold count when this hold was taken (more than 1: the owner held it elsewhere too). */
        long serverCount;
        long token;
        /** KEEPALIVE: the connection the lock is tied to. */
        Tie tie;
        /** Watchdog: the lease ends no earlier than this (client clock, from the invocation). */
        long validUntilNanos;
        long lastRenewNanos = System.nanoTime();
        boolean ended;

        Hold(String owner, byte[] ownerBytes, LockOptions options) {
            this.owner = owner;
            this.ownerBytes = ownerBytes;
            this.options = options;
            this.watch = new Watch(hashlock, new LossSignal(), "lock " + name + " held by " + owner);
        }

        void startChecks() {
            long period = Math.max(1, Math.min(options.checkIntervalMs(), options.leaseMs() / 3));
            watch.poll(period, options.keepalive() ? this::checkTied : () -> checkWatchdog(period));
        }

        /**
         * Watches the key's lifecycle events (in the background): every
         * event but {@code lock.acquired} and {@code lock.released} makes the
         * hold look at itself at once. A holder loses its lock by an ending
         * event of its own ({@code lock.expired}, {@code lock.forced},
         * {@code lock.closed}) or by the server's own events ({@code del},
         * {@code evicted}, ... when those classes are on); a release is its
         * owner's, and another owner's grant comes after one of those (or
         * after a DEL, which the periodic check finds).
         */
        void subscribe(long sentNanos) {
            Watch.Check look = options.keepalive() ? this::lookTied : this::lookWatchdog;
            try {
                hashlock.workers().execute(() -> {
                    if (watch.stopped()) return;
                    try {
                        watch.events(hashlock.subscriber().watch(key, sentNanos,
                                e -> !e.equals("lock.acquired") && !e.equals("lock.released"), () -> watch.look(look)));
                    } catch (RuntimeException e) {
                        // no subscription: the periodic check finds a loss alone
                    }
                });
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // hashlock is closing
            }
        }

        /** True until the hold ended (released, lost, settled). */
        synchronized boolean active() {
            return !ended && count > 0;
        }

        /**
         * KEEPALIVE, at an event: still ours? (Only a look: re-tying a lock
         * that lost its tie is the periodic check's job.)
         */
        private void lookTied() {
            synchronized (this) {
                if (ended) return;
                LockInfo info;
                try {
                    info = parseInfo(Errors.check(tie.call(List.of(b("LOCK.INFO"), key))));
                } catch (ConnectionException e) {
                    throw new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + " held by " + owner + ": its connection failed (" + e.getMessage() + ")", e);
                }
                notHeldUnless(info);
            }
        }

        /** Watchdog, at an event: still ours? (A look, not a renewal: that would extend a lease someone just shortened.) */
        private void lookWatchdog() {
            synchronized (this) {
                if (ended) return;
                notHeldUnless(parseInfo(Errors.check(hashlock.router().call(key, List.of(b("LOCK.INFO"), key)))));
            }
        }

        /**
         * The grant was a re-entry of a lock this owner id holds elsewhere
         * (another process with the same election candidate id): give the
         * hold back, untie the lock from this connection (its holder's own
         * check ties it again), and end this hold without a loss.
         */
        void dropDuplicate() {
            synchronized (this) {
                if (ended) return;
                try {
                    send(List.of(b("LOCK.RELEASE"), key, ownerBytes));
                    if (tie != null) tie.call(renewArgs(ownerBytes, false, options));
                } catch (RuntimeException e) {
                    if (tie != null) tie.close(); // cannot untie: do not pool a tied connection
                }
                end();
            }
        }

        /** KEEPALIVE: still ours, and still tied? Re-ties when the tie was lost (failover, slot moved). */
        private void checkTied() {
            synchronized (this) {
                if (ended) return;
                LockInfo info;
                try {
                    info = parseInfo(Errors.check(tie.call(List.of(b("LOCK.INFO"), key))));
                } catch (ConnectionException e) {
                    // The tie is the connection: without it the server released the lock.
                    throw new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + " held by " + owner + ": its connection failed (" + e.getMessage() + ")", e);
                }
                notHeldUnless(info);
                if (!info.keepalive()) {
                    Object renewed = Errors.check(tie.call(renewArgs(ownerBytes, true, options)));
                    if (!Long.valueOf(1).equals(renewed)) throw gone("a re-tie found it gone");
                }
            }
        }

        /** Watchdog: renews every third of the lease, checks in between. */
        private void checkWatchdog(long period) {
            synchronized (this) {
                if (ended) return;
                long now = System.nanoTime();
                boolean renewDue = now - lastRenewNanos >= (options.leaseMs() / 3 - period / 2) * 1_000_000L;
                try {
                    if (renewDue) {
                        long invoked = System.nanoTime();
                        Object r = Errors.check(hashlock.router().call(key, renewArgs(ownerBytes, false, options)));
                        if (!Long.valueOf(1).equals(r)) throw gone("the watchdog's renewal found it gone");
                        lastRenewNanos = invoked;
                        validUntilNanos = invoked + options.leaseMs() * 1_000_000L;
                    } else {
                        notHeldUnless(parseInfo(Errors.check(hashlock.router().call(key, List.of(b("LOCK.INFO"), key)))));
                    }
                } catch (LockLostException e) {
                    throw e;
                } catch (HashlockException e) {
                    if (System.nanoTime() - validUntilNanos >= 0) {
                        throw new LockLostException(LossReason.RENEWAL_FAILED,
                                "lock " + name + " held by " + owner + ": its lease ran out before the watchdog could renew it (" + e.getMessage() + ")", e);
                    }
                }
            }
        }

        private void notHeldUnless(LockInfo info) {
            if (info == null) throw gone("the lock is free: its lease lapsed, or it was force-released or deleted");
            if (!info.owner().equals(owner)) throw gone("it is held by " + info.owner() + " now");
        }

        private LockLostException gone(String why) {
            return new LockLostException(LossReason.NOT_HELD, "lock " + name + " is no longer held by " + owner + ": " + why);
        }

        /** Sends a command about this hold: on the tie (KEEPALIVE) or routed. */
        private Object send(List<byte[]> args) {
            if (tie != null) return tie.call(args);
            return hashlock.router().call(key, args);
        }

        void reenter() {
            synchronized (this) {
                Object reply;
                try {
                    reply = send(acquireArgs(ownerBytes, null));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    throw lose(new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + ": its KEEPALIVE connection failed (" + e.getMessage() + ")", e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                long[] got = parseAcquire(Errors.check(reply));
                if (got == null) throw lose(gone("a re-entry found it held by another owner"));
                if (got[0] == 1) {
                    // We had lost it and just took it afresh: give that back.
                    try {
                        send(List.of(b("LOCK.RELEASE"), key, ownerBytes));
                    } catch (RuntimeException ignored) {
                        // the lease ends it
                    }
                    throw lose(gone("a re-entry found it gone (and gave back the fresh grant)"));
                }
                count++;
                if (options.token()) token = got[1];
                if (tie == null) validUntilNanos = System.nanoTime() + options.leaseMs() * 1_000_000L;
            }
        }

        void release() {
            synchronized (this) {
                LockLostException lost = watch.signal().cause().orElse(null);
                if (lost != null) {
                    settle();
                    throw lost;
                }
                Object reply;
                try {
                    reply = send(List.of(b("LOCK.RELEASE"), key, ownerBytes));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    if (count == 1) {
                        // The tied connection went during the release: the
                        // server releases a tied lock when its connection
                        // closes, so it is released either way.
                        end();
                        return;
                    }
                    throw lose(new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + ": its KEEPALIVE connection failed; all " + count + " holds are gone", e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                if (reply instanceof Resp.ErrorReply e && e.code().equals("NOTOWNER")) {
                    throw lose(new NotOwnerException("lock " + name + " was lost while held by " + owner + " (" + e.message() + ")"));
                }
                long left = (Long) Errors.check(reply);
                count--;
                if (left == 0 && count > 0) {
                    int gone = count;
                    throw lose(gone("the release freed it, but " + gone + " outer hold(s) were already gone"));
                }
                if (count == 0) {
                    if (left > 0 && tie != null) {
                        // The owner still holds it through someone else (a
                        // Redisson client sharing this id): untie it from
                        // this connection before the pool gets it back, or
                        // closing that connection one day would release it.
                        try {
                            tie.call(renewArgs(ownerBytes, false, options));
                        } catch (RuntimeException e) {
                            tie.close(); // cannot untie: do not pool a tied connection
                        }
                    }
                    end();
                }
            }
        }

        void renew() {
            synchronized (this) {
                watch.signal().throwIfLost();
                Object r;
                try {
                    long invoked = System.nanoTime();
                    r = Errors.check(send(renewArgs(ownerBytes, options.keepalive(), options)));
                    if (Long.valueOf(1).equals(r)) {
                        lastRenewNanos = invoked;
                        validUntilNanos = invoked + options.leaseMs() * 1_000_000L;
                        return;
                    }
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    throw lose(new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + ": its KEEPALIVE connection failed", e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                throw lose(gone("a renewal found it gone"));
            }
        }

        /** The hold ended cleanly: stop watching, the connection goes back to the pool. */
        private void end() {
            ended = true;
            count = 0;
            watch.stop();
            if (tie != null) tie.giveBack();
            hashlock.holds().remove(new Hashlock.HoldKey(name, owner), this);
        }

        /** The hold is lost: the signal fires, this thread's state is cleared. */
        private LockLostException lose(LockLostException e) {
            watch.stop();
            watch.signal().fire(e);
            settle();
            return watch.signal().cause().orElse(e);
        }

        /**
         * Clears a lost hold, in its owner's thread: gives back whatever this
         * owner may still hold on the server (e.g. a hold that outlived its
         * tie in a failover), then forgets it.
         */
        void settle() {
            synchronized (this) {
                if (ended) return;
                ended = true;
                watch.stop();
                int left = count;
                count = 0;
                hashlock.holds().remove(new Hashlock.HoldKey(name, owner), this);
                RespConnection c = tie == null ? null : tie.connection();
                for (int i = 0; i < left; i++) {
                    try {
                        Object r = hashlock.router().call(key, List.of(b("LOCK.RELEASE"), key, ownerBytes));
                        if (!(r instanceof Long n) || n == 0) break;
                    } catch (RuntimeException e) {
                        break;
                    }
                }
                if (c != null) hashlock.router().pool().giveBack(c);
            }
        }

        /** hashlock is closing: close the tie (the server releases it), fire the signal. */
        void abandon(String why) {
            synchronized (this) {
                if (ended) return;
                ended = true;
                watch.stop();
                if (tie != null) tie.close();
                watch.signal().fire(new LockLostException(LossReason.CONNECTION_LOST, "lock " + name + ": " + why));
            }
        }
    }
}
