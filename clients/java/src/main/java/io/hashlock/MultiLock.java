package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Waiter;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;

/**
 * A lock of several keys, taken all at once or not at all
 * ({@code LOCK.MACQUIRE} / {@code LOCK.MRELEASE}). Each key is an ordinary
 * lock ({@link Lock}, Redisson's {@code RLock}), so a Redisson
 * {@code RedissonMultiLock} over the same names sees the holds. A waiter
 * queues on every key in one arrival order and is granted when it heads the
 * queue of each and all are free: never a partial hold, never a deadlock
 * (two threads asking for {a, b} and {b, a} are served in turn).
 *
 * <p>Held by threads (owner {@code <Hashlock id>:<thread id>}), reentrant;
 * KEEPALIVE by default: the holds are tied to a connection of their own.
 * On a cluster the keys must share a slot, or the server refuses them with
 * {@link CrossSlotException}: give them one hash tag
 * ({@code {order:42}:stock}, {@code {order:42}:payment}).
 *
 * <pre>{@code
 * MultiLock both = hashlock.multiLock("{acct}:alice", "{acct}:bob");
 * both.lock();                      // both accounts, or wait for both
 * try {
 *     transfer("alice", "bob", 10);
 * } finally {
 *     both.unlock();
 * }
 * }</pre>
 */
public final class MultiLock extends OwnedLock {
    private final Hashlock hashlock;
    private final List<String> names;
    private final List<byte[]> keys;
    private final LockOptions options;

    MultiLock(Hashlock hashlock, List<String> names, LockOptions options) {
        if (names.isEmpty()) throw new IllegalArgumentException("a multi-key lock needs at least one key");
        if (new HashSet<>(names).size() != names.size()) throw new IllegalArgumentException("the same key is given twice: " + names);
        this.hashlock = hashlock;
        this.names = names;
        this.options = options;
        List<byte[]> k = new ArrayList<>(names.size());
        for (String n : names) k.add(Resp.bytes(n));
        this.keys = List.copyOf(k);
    }

    public List<String> names() {
        return names;
    }

    public LockOptions options() {
        return options;
    }

    /** The calling thread's owner id: {@code <Hashlock id>:<thread id>}. */
    public String owner() {
        return hashlock.id() + ":" + Thread.currentThread().getId();
    }

    /**
     * Drops one hold of every key; the last frees them all at once (queued
     * waiters are served) and gives the connection back to the pool.
     *
     * @throws IllegalMonitorStateException if the calling thread holds nothing here
     * @throws LockLostException if a key was lost before this call
     */
    @Override
    public void unlock() {
        Holds h = current();
        if (h == null || h.count() == 0) throw new IllegalMonitorStateException("multi-key lock " + names + " is not held by " + owner());
        h.release();
    }

    /** The calling thread's holds taken through this object and not released. */
    public int holdCount() {
        Holds h = current();
        return h == null ? 0 : h.count();
    }

    public boolean isHeldByCurrentThread() {
        return holdCount() > 0;
    }

    /** The loss signal of the calling thread's holds: fires if any key is lost. */
    public LossSignal signal() {
        Holds h = current();
        if (h == null || h.count() == 0) throw new IllegalMonitorStateException("multi-key lock " + names + " is not held by " + owner());
        return h.watch.signal();
    }

    /** Every key's lease from now (KEEPALIVE: tied again). */
    public void renew() {
        Holds h = current();
        if (h == null || h.count() == 0) throw new IllegalMonitorStateException("multi-key lock " + names + " is not held by " + owner());
        h.renew();
    }

    @Override
    public String toString() {
        return "hashlock.MultiLock[" + names + ", " + options + "]";
    }

    private Hashlock.OwnerKey ownerKey(String owner) {
        return new Hashlock.OwnerKey("multi", String.join("\u0000", names), owner);
    }

    private Holds current() {
        return (Holds) hashlock.owned().get(ownerKey(owner()));
    }

    @Override
    boolean acquire(Long block, boolean interruptible) throws InterruptedException {
        if (hashlock.closed()) throw new IllegalStateException("hashlock is closed");
        String owner = owner();
        Holds held = current();
        if (held != null) {
            if (held.active()) {
                held.reenter();
                return true;
            }
            held.settle();
        }
        boolean dedicated = options.keepalive() || block != null;
        byte[] ownerBytes = Resp.bytes(owner);
        long sent = System.nanoTime();
        Waiter.Answer answer = Tenure.grant(hashlock, keys.get(0), acquireArgs(ownerBytes, block, dedicated), block, dedicated,
                Tenure.replicasMs(options), interruptible, "multi-key lock " + names, node -> {
                    // The owner held none of them: a release finds only what this wait was granted (NOTOWNER: nothing).
                    Object r = hashlock.router().callFrom(node, keys.get(0), releaseArgs(ownerBytes));
                    if (r instanceof List<?>) hashlock.countGivenBack();
                });
        Object reply = answer.reply();
        if (reply == null || reply instanceof Resp.ErrorReply) {
            if (answer.connection() != null) hashlock.router().pool().giveBack(answer.connection());
            Errors.check(reply);
            return false;
        }
        if (!(reply instanceof List<?> l) || l.size() != keys.size()) {
            if (answer.connection() != null) answer.connection().close();
            throw new HashlockException("LOCK.MACQUIRE: unexpected reply " + Resp.text(reply));
        }
        Holds h = new Holds(owner, ownerBytes);
        h.count = 1;
        hashlock.owned().put(ownerKey(owner), h);
        try {
            h.start(answer.connection(), answer.asking(), sent);
        } catch (RuntimeException e) {
            hashlock.owned().remove(ownerKey(owner), h);
            throw e;
        }
        return true;
    }

    private List<byte[]> acquireArgs(byte[] owner, Long block, boolean keepalive) {
        List<byte[]> a = new ArrayList<>(keys.size() + 14);
        a.add(b("LOCK.MACQUIRE"));
        a.add(b(Integer.toString(keys.size())));
        a.addAll(keys);
        a.add(owner);
        a.add(b("PX"));
        a.add(b(Long.toString(options.leaseMs())));
        if (block != null) {
            a.add(b("BLOCK"));
            a.add(b(Long.toString(block)));
        }
        if (keepalive) a.add(b("KEEPALIVE")); // a wait is tied, so that closing it gives back a grant on its way
        Tenure.addReplicas(a, options);
        return a;
    }

    private List<byte[]> releaseArgs(byte[] owner) {
        List<byte[]> a = new ArrayList<>(keys.size() + 3);
        a.add(b("LOCK.MRELEASE"));
        a.add(b(Integer.toString(keys.size())));
        a.addAll(keys);
        a.add(owner);
        return a;
    }

    private static byte[] b(String s) {
        return Resp.bytes(s);
    }

    /** One owner's (thread's) holds of every key: one tenure, one tie, one loss signal. */
    final class Holds extends Tenure {
        final String owner;
        final byte[] ownerBytes;
        int count;

        Holds(String owner, byte[] ownerBytes) {
            super(MultiLock.this.hashlock, keys.get(0), MultiLock.this.options, "multi-key lock " + names + " held by " + owner);
            this.owner = owner;
            this.ownerBytes = ownerBytes;
        }

        synchronized int count() {
            return ended ? 0 : count;
        }

        @Override
        String what() {
            return "multi-key lock " + names + " held by " + owner;
        }

        @Override
        List<byte[]> eventKeys() {
            return keys;
        }

        @Override
        List<List<byte[]>> renewCommands(boolean keepalive) {
            List<List<byte[]>> cmds = new ArrayList<>(keys.size());
            for (byte[] k : keys) {
                List<byte[]> a = new ArrayList<>(10);
                a.add(b("LOCK.RENEW"));
                a.add(k);
                a.add(ownerBytes);
                a.add(b("PX"));
                a.add(b(Long.toString(options.leaseMs())));
                if (keepalive) a.add(b("KEEPALIVE"));
                addReplicas(a, options);
                cmds.add(a);
            }
            return cmds;
        }

        @Override
        void lookAtServer() {
            for (byte[] k : keys) {
                LockInfo info = Lock.parseInfo(Errors.check(hashlock.router().call(key, List.of(b("LOCK.INFO"), k))));
                if (info == null || !info.owner().equals(owner)) {
                    throw gone("key " + Resp.text(k) + (info == null ? " is free (lapsed, force-released or deleted)" : " is held by " + info.owner()));
                }
            }
        }

        @Override
        boolean looksAt(String event) {
            return !event.equals("lock.acquired") && !event.equals("lock.released");
        }

        @Override
        void giveBackRemains() {
            for (byte[] k : keys) {
                for (int i = 0; i < count; i++) {
                    Object r = hashlock.router().call(key, List.of(b("LOCK.RELEASE"), k, ownerBytes));
                    if (!(r instanceof Long left) || left == 0) break;
                }
            }
            count = 0;
        }

        @Override
        void forget() {
            hashlock.owned().remove(ownerKey(owner), this);
        }

        void reenter() {
            synchronized (this) {
                Object reply;
                try {
                    reply = send(acquireArgs(ownerBytes, null, options.keepalive()));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    throw lose(connectionLost(e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                Errors.check(reply);
                if (reply == null) throw lose(gone("a re-entry found a key held by another owner"));
                if (!(reply instanceof List<?> l)) throw new HashlockException("LOCK.MACQUIRE: unexpected reply " + Resp.text(reply));
                for (Object n : l) {
                    if (Long.valueOf(1).equals(n)) {
                        // A key had been lost and this call took it afresh: give back this call's holds.
                        try {
                            send(releaseArgs(ownerBytes));
                        } catch (RuntimeException ignored) {
                            // the lease ends them
                        }
                        throw lose(gone("a re-entry found a key gone (and gave back the fresh grant)"));
                    }
                }
                count++;
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
                    reply = send(releaseArgs(ownerBytes));
                } catch (ConnectionException e) {
                    if (tie == null) throw e;
                    if (count == 1) {
                        end(); // the server releases what is tied as the connection closes
                        return;
                    }
                    throw lose(connectionLost(e));
                } catch (LockLostException e) {
                    throw lose(e);
                }
                if (reply instanceof Resp.ErrorReply e && e.code().equals("NOTOWNER")) {
                    throw lose(new NotOwnerException(what() + ": a key was lost (" + e.message() + "); nothing was released"));
                }
                Object r = Errors.check(reply);
                if (!(r instanceof List<?> lefts)) throw new HashlockException("LOCK.MRELEASE: unexpected reply " + Resp.text(r));
                count--;
                boolean someLeft = false;
                boolean someFreed = false;
                for (Object n : lefts) {
                    if (Long.valueOf(0).equals(n)) someFreed = true;
                    else someLeft = true;
                }
                if (count > 0 && someFreed) throw lose(gone("the release freed a key, but " + count + " outer hold(s) were already gone"));
                if (count == 0) {
                    if (someLeft && tie != null) {
                        try {
                            for (List<byte[]> cmd : renewCommands(false)) tie.call(cmd);
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
