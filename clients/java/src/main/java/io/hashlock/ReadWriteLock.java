package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Waiter;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A read-write lock at one key ({@code RWLOCK.*}), shared with Redisson's
 * {@code RReadWriteLock} on the same name (the same hash, read-hold timeout
 * keys and channel). Many owners may read at once, one may write; the
 * writer may also read (downgrade: take {@link #readLock()} while holding
 * {@link #writeLock()}, then release the write hold). An owner that holds it
 * for reading only cannot take it for writing: an upgrade would deadlock,
 * and the server refuses it at once with {@link NoUpgradeException}
 * (release the read holds first).
 *
 * <p>Like {@link java.util.concurrent.locks.ReentrantReadWriteLock} (and
 * Redisson's) it is held by threads: the owner id is
 * {@code <Hashlock id>:<thread id>}, each half re-enters. Waits queue in the
 * server, first come first served, and writers do not starve: a reader
 * does not pass a queued writer, and a reader at the head of the queue is
 * granted with every reader behind it up to the first writer.
 *
 * <p>By default (KEEPALIVE) the owner's holds are tied to a connection of
 * their own while the thread holds anything: renewed by the server,
 * released the moment the connection closes. {@link ModeLock#signal()} fires
 * when they are lost. {@code token(true)} gives write holds a fencing token
 * ({@link ModeLock#token()}).
 *
 * <pre>{@code
 * ReadWriteLock catalog = hashlock.readWriteLock("catalog");
 * catalog.readLock().lock();
 * try {
 *     render(load());
 * } finally {
 *     catalog.readLock().unlock();
 * }
 * }</pre>
 */
public final class ReadWriteLock implements java.util.concurrent.locks.ReadWriteLock {
    /** Which half. */
    public enum Mode {
        READ,
        WRITE
    }

    private final Hashlock hashlock;
    private final String name;
    private final byte[] key;
    private final LockOptions options;
    private final ModeLock read = new ModeLock(Mode.READ);
    private final ModeLock write = new ModeLock(Mode.WRITE);

    ReadWriteLock(Hashlock hashlock, String name, LockOptions options) {
        this.hashlock = hashlock;
        this.name = name;
        this.key = Resp.bytes(name);
        this.options = options;
    }

    public String name() {
        return name;
    }

    public LockOptions options() {
        return options;
    }

    /** The calling thread's owner id: {@code <Hashlock id>:<thread id>}, as Redisson writes it. */
    public String owner() {
        return hashlock.id() + ":" + Thread.currentThread().getId();
    }

    @Override
    public ModeLock readLock() {
        return read;
    }

    @Override
    public ModeLock writeLock() {
        return write;
    }

    /** {@code RWLOCK.INFO}; empty when the lock is free. */
    public Optional<RwLockInfo> info() {
        return Optional.ofNullable(RwLockInfo.parse(Errors.check(hashlock.router().call(key, List.of(b("RWLOCK.INFO"), key)))));
    }

    /** {@code RWLOCK.FORCERELEASE}: removes every hold, whoever holds them; their loss signals fire. True if a lock was removed. */
    public boolean forceUnlock() {
        return Long.valueOf(1).equals(Errors.check(hashlock.router().call(key, List.of(b("RWLOCK.FORCERELEASE"), key))));
    }

    /**
     * Every hold of the calling thread gets the lease from now (with
     * KEEPALIVE: tied again, e.g. after a failover).
     *
     * @throws IllegalMonitorStateException if the calling thread holds nothing here
     * @throws LockLostException if its holds are gone
     */
    public void renew() {
        Holds h = current();
        if (h == null) throw new IllegalMonitorStateException("read-write lock " + name + " is not held by " + owner());
        h.renew();
    }

    @Override
    public String toString() {
        return "hashlock.ReadWriteLock[" + name + ", " + options + "]";
    }

    /** One half of the lock: a {@link java.util.concurrent.locks.Lock} held by threads. */
    public final class ModeLock extends OwnedLock {
        private final Mode mode;

        private ModeLock(Mode mode) {
            this.mode = mode;
        }

        public Mode mode() {
            return mode;
        }

        /** The read-write lock this half belongs to. */
        public ReadWriteLock readWriteLock() {
            return ReadWriteLock.this;
        }

        @Override
        boolean acquire(Long block, boolean interruptible) throws InterruptedException {
            return ReadWriteLock.this.acquire(mode, block, interruptible);
        }

        /**
         * Drops one hold of this mode. The thread's last hold (of both
         * modes) frees its part of the lock and gives its connection back to
         * the pool.
         *
         * @throws IllegalMonitorStateException if the thread holds none of this mode
         * @throws LockLostException if its holds were lost before this call
         */
        @Override
        public void unlock() {
            Holds h = current();
            if (h == null || h.count(mode) == 0) {
                throw new IllegalMonitorStateException("read-write lock " + name + " is not held for " + mode + " by " + owner());
            }
            h.release(mode);
        }

        /** The calling thread's holds of this mode taken through hashlock and not released. */
        public int holdCount() {
            Holds h = current();
            return h == null ? 0 : h.count(mode);
        }

        /** True while the calling thread holds this mode (as this process knows it). */
        public boolean isHeldByCurrentThread() {
            return holdCount() > 0;
        }

        /**
         * The loss signal of the calling thread's holds (both modes: they
         * are one owner's, tied and lost together).
         *
         * @throws IllegalMonitorStateException if the thread holds none of this mode
         */
        public LossSignal signal() {
            Holds h = current();
            if (h == null || h.count(mode) == 0) {
                throw new IllegalMonitorStateException("read-write lock " + name + " is not held for " + mode + " by " + owner());
            }
            return h.watch.signal();
        }

        /**
         * The fencing token of the thread's latest write acquisition
         * ({@code token(true)}; re-entries take one too), from the counter
         * Redisson's {@code RFencedLock} and {@code LOCK.ACQUIRE ... TOKEN} use.
         */
        public long token() {
            if (mode != Mode.WRITE) throw new IllegalStateException("only write holds have fencing tokens");
            if (!options.token()) throw new IllegalStateException("read-write lock " + name + " was taken without TOKEN: LockOptions.builder().token(true)");
            Holds h = current();
            if (h == null || h.write == 0) throw new IllegalMonitorStateException("read-write lock " + name + " is not held for WRITE by " + owner());
            return h.token;
        }

        @Override
        public String toString() {
            return "hashlock.ReadWriteLock[" + name + "]." + (mode == Mode.READ ? "readLock()" : "writeLock()");
        }
    }

    // ---- acquiring ----------------------------------------------------------

    private Hashlock.OwnerKey ownerKey(String owner) {
        return new Hashlock.OwnerKey("rwlock", name, owner);
    }

    private Holds current() {
        return (Holds) hashlock.owned().get(ownerKey(owner()));
    }

    private boolean acquire(Mode mode, Long block, boolean interruptible) throws InterruptedException {
        if (hashlock.closed()) throw new IllegalStateException("hashlock is closed");
        String owner = owner();
        Holds held = current();
        if (held != null) {
            if (held.active()) {
                held.reenter(mode); // never waits: a re-entry or a downgrade (an upgrade: NOUPGRADE)
                return true;
            }
            held.settle(); // lost in the background: settle it first, in this thread
        }
        boolean dedicated = options.keepalive() || block != null;
        byte[] ownerBytes = b(owner);
        List<byte[]> args = acquireArgs(ownerBytes, mode, block, dedicated);
        long sent = System.nanoTime();
        Waiter.Answer answer = Tenure.grant(hashlock, key, args, block, dedicated, Tenure.replicasMs(options), interruptible,
                "read-write lock " + name, node -> {
                    // The owner held nothing (else it would not wait): a release finds only what this wait was granted.
                    Object r = hashlock.router().callFrom(node, key, List.of(b("RWLOCK.RELEASE"), key, ownerBytes, b(mode.name())));
                    if (r instanceof Long) hashlock.countGivenBack();
                });
        Object reply = answer.reply();
        if (reply == null || reply instanceof Resp.ErrorReply) {
            if (answer.connection() != null) hashlock.router().pool().giveBack(answer.connection());
            Errors.check(reply);
            return false;
        }
        long[] got;
        try {
            got = parseAcquire(reply);
        } catch (RuntimeException e) {
            if (answer.connection() != null) answer.connection().close();
            throw e;
        }
        Holds h = new Holds(owner, ownerBytes);
        if (mode == Mode.READ) h.read = 1;
        else h.write = 1;
        h.token = got[1];
        hashlock.owned().put(ownerKey(owner), h);
        try {
            h.start(answer.connection(), answer.asking(), sent);
        } catch (RuntimeException e) {
            hashlock.owned().remove(ownerKey(owner), h);
            throw e;
        }
        return true;
    }

    private List<byte[]> acquireArgs(byte[] owner, Mode mode, Long block, boolean keepalive) {
        List<byte[]> a = new ArrayList<>(14);
        a.add(b("RWLOCK.ACQUIRE"));
        a.add(key);
        a.add(owner);
        a.add(b(mode.name()));
        a.add(b("PX"));
        a.add(b(Long.toString(options.leaseMs())));
        if (block != null) {
            a.add(b("BLOCK"));
            a.add(b(Long.toString(block)));
        }
        if (keepalive) a.add(b("KEEPALIVE")); // a wait is tied, so that closing it gives back a grant on its way
        if (mode == Mode.WRITE && options.token()) a.add(b("TOKEN"));
        Tenure.addReplicas(a, options);
        return a;
    }

    /** [holds of that mode, token] (token 0 without TOKEN). */
    private static long[] parseAcquire(Object reply) {
        if (reply instanceof Long n) return new long[] {n, 0};
        if (reply instanceof List<?> l && l.size() == 2 && l.get(0) instanceof Long n && l.get(1) instanceof Long t) return new long[] {n, t};
        throw new HashlockException("RWLOCK.ACQUIRE: unexpected reply " + Resp.text(reply));
    }

    private static byte[] b(String s) {
        return Resp.bytes(s);
    }

    /** One owner's (thread's) holds of the lock, both modes: one tenure, one tie, one loss signal. */
    final class Holds extends Tenure {
        final String owner;
        final byte[] ownerBytes;
        int read;
        int write;
        long token;

        Holds(String owner, byte[] ownerBytes) {
            super(ReadWriteLock.this.hashlock, ReadWriteLock.this.key, ReadWriteLock.this.options, "read-write lock " + name + " held by " + owner);
            this.owner = owner;
            this.ownerBytes = ownerBytes;
        }

        synchronized int count(Mode mode) {
            return ended ? 0 : mode == Mode.READ ? read : write;
        }

        @Override
        String what() {
            return "read-write lock " + name + " held by " + owner;
        }

        @Override
        List<List<byte[]>> renewCommands(boolean keepalive) {
            List<byte[]> a = new ArrayList<>(10);
            a.add(b("RWLOCK.RENEW"));
            a.add(key);
            a.add(ownerBytes);
            a.add(b("PX"));
            a.add(b(Long.toString(options.leaseMs())));
            if (keepalive) a.add(b("KEEPALIVE"));
            addReplicas(a, options);
            return List.of(a);
        }

        /** The owner's fields in Redisson's layout: {@code <owner>} (read holds) and {@code <owner>:write}. */
        @Override
        void lookAtServer() {
            Object r = Errors.check(hashlock.router().call(key, List.of(b("HMGET"), key, ownerBytes, b(owner + ":write"))));
            if (!(r instanceof List<?> l) || l.size() != 2) return;
            if (read > 0 && holds(l.get(0)) < read) throw gone("its read holds are gone (lapsed, force-released or deleted)");
            if (write > 0 && holds(l.get(1)) < write) throw gone("its write holds are gone (lapsed, force-released or deleted)");
        }

        private long holds(Object field) {
            if (field == null) return 0;
            try {
                return Long.parseLong(Resp.text(field));
            } catch (NumberFormatException e) {
                return 0;
            }
        }

        @Override
        boolean looksAt(String event) {
            return !event.equals("rwlock.acquired") && !event.equals("rwlock.released");
        }

        @Override
        void giveBackRemains() {
            for (Mode m : Mode.values()) {
                int n = m == Mode.READ ? read : write;
                for (int i = 0; i < n; i++) {
                    Object r = hashlock.router().call(key, List.of(b("RWLOCK.RELEASE"), key, ownerBytes, b(m.name())));
                    if (!(r instanceof Long left) || left == 0) break;
                }
            }
            read = 0;
            write = 0;
        }

        @Override
        void forget() {
            hashlock.owned().remove(ownerKey(owner), this);
        }

        /** A further hold of an owner that holds the lock: never queued (re-entry, downgrade), or NOUPGRADE. */
        void reenter(Mode mode) {
            synchronized (this) {
                Object reply;
                try {
                    reply = send(acquireArgs(ownerBytes, mode, null, options.keepalive()));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    throw lose(connectionLost(e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                if (reply instanceof Resp.ErrorReply e && e.code().equals("NOUPGRADE")) {
                    throw new NoUpgradeException(e.message() + " (read-write lock " + name + ", owner " + owner + ": " + read
                            + " read hold(s) kept; nothing changed)");
                }
                Errors.check(reply);
                if (reply == null) throw lose(gone("a further acquisition found it held by another owner"));
                long[] got = parseAcquire(reply);
                int local = mode == Mode.READ ? read : write;
                if (got[0] == 1 && local > 0) {
                    // Our holds had been lost and this call took it afresh: give that back.
                    try {
                        send(List.of(b("RWLOCK.RELEASE"), key, ownerBytes, b(mode.name())));
                    } catch (RuntimeException ignored) {
                        // the lease ends it
                    }
                    throw lose(gone("a re-entry found its holds gone (and gave back the fresh grant)"));
                }
                if (mode == Mode.READ) read++;
                else {
                    write++;
                    token = got[1];
                }
                if (tie == null) validUntilNanos = System.nanoTime() + options.leaseMs() * 1_000_000L;
            }
        }

        void release(Mode mode) {
            synchronized (this) {
                LockLostException lost = watch.signal().cause().orElse(null);
                if (lost != null) {
                    settle();
                    throw lost;
                }
                Object reply;
                try {
                    reply = send(List.of(b("RWLOCK.RELEASE"), key, ownerBytes, b(mode.name())));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    if (read + write == 1) {
                        // The tied connection went during the release: the
                        // server releases what is tied as it closes.
                        end();
                        return;
                    }
                    throw lose(connectionLost(e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                if (reply instanceof Resp.ErrorReply e && e.code().equals("NOTOWNER")) {
                    throw lose(new NotOwnerException(what() + ": its " + mode + " hold was lost (" + e.message() + ")"));
                }
                long left = (Long) Errors.check(reply);
                if (mode == Mode.READ) read--;
                else write--;
                int local = mode == Mode.READ ? read : write;
                if (left == 0 && local > 0) throw lose(gone("the release left none, but " + local + " outer " + mode + " hold(s) were already gone"));
                if (read + write == 0) {
                    if (left > 0 && tie != null) {
                        // Held through someone else sharing the owner id (a
                        // Redisson client): untie before the pool gets the connection.
                        try {
                            tie.call(renewCommands(false).get(0));
                        } catch (RuntimeException e) {
                            tie.close();
                        }
                    }
                    end();
                }
            }
        }
    }
}
