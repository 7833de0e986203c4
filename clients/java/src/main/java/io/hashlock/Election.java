package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Subscriber;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * Leader election on one key (etcd's {@code concurrency.Election}, Curator's
 * {@code LeaderLatch}): candidates {@link #campaign()}, the server queues
 * them FIFO, the first leads until it resigns, its process dies or its
 * connection closes, and the next in line takes over at once. Each term has
 * a number that grows with every term ({@link Leadership#term()}, the fencing
 * token of the grant) for the resources the leader writes to.
 *
 * <p>Underneath it is the key's lock: a campaign is
 * {@code LOCK.ACQUIRE key id BLOCK 0 KEEPALIVE TOKEN}, a resignation
 * {@code LOCK.RELEASE}, {@link #leader()} is {@code LOCK.INFO}, and
 * {@link #observe} follows the module's lifecycle keyspace events — so the
 * server must send them ({@code notify-keyspace-events} with K or E, and d):
 * {@link #campaign()} and {@link #observe} throw {@link EventsOffException}
 * at once otherwise, saying what to set. One Election is one candidate; it
 * may be used from any thread.
 *
 * <pre>{@code
 * Election election = hashlock.election("billing:leader", ElectionOptions.builder().id("node-a").build());
 * Leadership term = election.campaign();          // waits in the server's queue until elected
 * term.signal().onLost(e -> stopLeading());        // revoked: the next candidate leads already
 * runAsLeader(term.term());                         // pass the term to what you write
 * term.resign();
 * }</pre>
 */
public final class Election {
    private static final AtomicLong SEQ = new AtomicLong();

    private final Hashlock hashlock;
    private final String name;
    private final byte[] key;
    private final String id;
    private final Lock lock;
    /** Serialises campaigns: a second one waits for the first, then returns the same term. */
    private final ReentrantLock campaigning = new ReentrantLock();
    private volatile Leadership current;

    Election(Hashlock hashlock, String name, ElectionOptions options) {
        this.hashlock = hashlock;
        this.name = name;
        this.key = Resp.bytes(name);
        this.id = options.id() != null ? options.id() : hashlock.id() + ":election:" + SEQ.incrementAndGet();
        LockOptions lockOptions = LockOptions.builder().lease(Duration.ofMillis(options.leaseMs())).token(true).keepalive(true)
                .checkInterval(Duration.ofMillis(options.checkIntervalMs())).build();
        this.lock = new Lock(hashlock, name, lockOptions, id);
    }

    public String name() {
        return name;
    }

    /** This candidate's id. */
    public String id() {
        return id;
    }

    /**
     * Waits in the server's queue until this candidate leads, and returns the
     * term (the term in force if it leads already). Interrupted: the wait's
     * connection is closed and a grant on its way is given back before
     * {@link InterruptedException} is thrown.
     *
     * @throws EventsOffException the server does not send lifecycle events
     * @throws DuplicateCandidateException another Election with this id leads
     */
    public Leadership campaign() throws InterruptedException {
        requireEvents();
        campaigning.lockInterruptibly();
        try {
            Optional<Leadership> now = leadership();
            if (now.isPresent()) return now.get();
            try (Subscriber.KeyWatch ready = preSubscribe()) {
                lock.lockInterruptibly();
                return won();
            }
        } finally {
            campaigning.unlock();
        }
    }

    /**
     * Subscribes to the key's events before the campaign, so the term's own
     * watch finds the subscription active from the grant on (no gap to
     * close after it). The channel lingers after this closes.
     */
    private Subscriber.KeyWatch preSubscribe() {
        try {
            return hashlock.subscriber().watch(key, System.nanoTime(), e -> false, () -> {});
        } catch (RuntimeException e) {
            return null; // the term's own watch tries again
        }
    }

    /** As {@link #campaign()}, waiting at most {@code time} (the server's BLOCK); empty if not elected by then. */
    public Optional<Leadership> campaign(long time, TimeUnit unit) throws InterruptedException {
        requireEvents();
        long deadline = System.nanoTime() + unit.toNanos(time);
        if (!campaigning.tryLock(time, unit)) return Optional.empty();
        try {
            Optional<Leadership> now = leadership();
            if (now.isPresent()) return now;
            try (Subscriber.KeyWatch ready = preSubscribe()) {
                long left = Math.max(0, deadline - System.nanoTime());
                if (!lock.tryLock(TimeUnit.NANOSECONDS.toMillis(left), TimeUnit.MILLISECONDS)) return Optional.empty();
                return Optional.of(won());
            }
        } finally {
            campaigning.unlock();
        }
    }

    private Leadership won() {
        Lock.Hold h = lock.currentHold();
        if (h == null) throw new LockLostException(LossReason.NOT_HELD, "election " + name + ": the term was lost as it began");
        if (h.serverCount > 1) {
            h.dropDuplicate();
            throw new DuplicateCandidateException("election " + name + ": candidate " + id
                    + " leads already through another Election (another process with the same id?); ids must be unique");
        }
        Leadership l = new Leadership(this, h);
        current = l;
        return l;
    }

    /** This candidate's term in force, empty when it does not lead (as this Election last learned it). */
    public Optional<Leadership> leadership() {
        Leadership l = current;
        if (l != null && !l.isActive()) {
            current = null;
            l = null;
        }
        return Optional.ofNullable(l);
    }

    /** Ends this candidate's term if it leads (nothing otherwise): the next in line leads at once. */
    public void resign() {
        leadership().ifPresent(Leadership::resign);
    }

    /** Who leads now, asked of the server ({@code LOCK.INFO}); empty when nobody does. */
    public Optional<Leader> leader() {
        LockInfo info = Lock.parseInfo(Errors.check(hashlock.router().call(key, List.of(Resp.bytes("LOCK.INFO"), key))));
        return info == null ? Optional.empty() : Optional.of(new Leader(info.owner(), info.token()));
    }

    /**
     * Follows the election until the {@link Observation} is closed (or the
     * Hashlock): {@code listener} is called on a thread of the observation's
     * own, one event at a time, in the order the server made the changes.
     * The first event is the state now ({@code NEW_LEADER}, {@code ELECTED}
     * or {@code NO_LEADER}); then one per change: {@code NEW_LEADER} when
     * another candidate takes over, {@code ELECTED} and {@code REVOKED} for
     * this candidate's own terms, {@code NO_LEADER} when the key is free.
     * Terms only grow along the stream.
     *
     * <p>Driven by the key's lifecycle keyspace events, never by polling: at
     * each event it reads {@code LOCK.INFO}, which already shows the new
     * holder. A change superseded before that read (two hand-offs within one
     * round trip) shows as the later one only, as with etcd's Observe; so
     * does a change while the subscriber connection was being made again.
     * While the listener is busy, changes collapse into the latest.
     *
     * @throws EventsOffException at once when the server does not send the events
     */
    public Observation observe(Consumer<ElectionEvent> listener) {
        requireEvents();
        return new Observation(this, listener);
    }

    Hashlock hashlock() {
        return hashlock;
    }

    byte[] key() {
        return key;
    }

    /** Fails with EventsOffException when the key's node does not send the module's events. */
    void requireEvents() {
        Object reply = hashlock.router().call(key, List.of(Resp.bytes("CONFIG"), Resp.bytes("GET"), Resp.bytes("notify-keyspace-events")));
        if (!(reply instanceof List<?> l) || l.size() != 2) return; // CONFIG refused (ACL, renamed): cannot tell
        String flags = Resp.text(l.get(1));
        if (!EventsOffException.hears(flags)) {
            throw new EventsOffException(hashlock.router().nodeFor(key), flags, EventsOffException.wanted(flags));
        }
    }

    @Override
    public String toString() {
        return "hashlock.Election[" + name + ", candidate " + id + "]";
    }
}
