package io.hashlock;

import io.hashlock.internal.ConnectionPool;
import io.hashlock.internal.Router;
import io.hashlock.internal.Subscriber;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The entry point: one per application (like a {@code RedissonClient}). It
 * owns the pool of hashlock's own connections, the thread that checks held
 * locks, and this instance's id, from which every owner id is made
 * ({@code <id>:<thread id>}, Redisson's format). Make locks with
 * {@link #lock(String)}; close it at shutdown (tied locks are released by
 * the server as their connections close).
 *
 * <pre>{@code
 * try (Hashlock hashlock = Hashlock.create(JedisConnector.standalone("127.0.0.1", 6380))) {
 *     Lock lock = hashlock.lock("orders:42");
 *     ...
 * }
 * }</pre>
 */
public final class Hashlock implements AutoCloseable {
    private final Connector connector;
    private final String id;
    private final LockOptions defaults;
    private final ConnectionPool pool;
    private final Router router;
    private final ScheduledThreadPoolExecutor scheduler;
    private final ThreadPoolExecutor workers;
    private final Subscriber subscriber;
    private final Map<HoldKey, Lock.Hold> holds = new ConcurrentHashMap<>();
    /** Holds of the family (leases, read-write and multi-key holds) in force: closed with this instance. */
    private final java.util.Set<Tenure> tenures = ConcurrentHashMap.newKeySet();
    /** A read-write or multi-key lock's per-owner tenures, by (object, name, owner). */
    private final Map<OwnerKey, Tenure> owned = new ConcurrentHashMap<>();
    private final java.util.concurrent.atomic.AtomicLong givenBack = new java.util.concurrent.atomic.AtomicLong();
    private volatile boolean closed;

    record HoldKey(String name, String owner) {}

    record OwnerKey(String kind, String name, String owner) {}

    private Hashlock(Builder b) {
        this.connector = b.connector;
        this.id = b.id;
        this.defaults = b.defaults;
        this.pool = new ConnectionPool(connector, b.maxIdlePerNode, b.commandTimeout.toMillis());
        this.router = new Router(pool, b.commandTimeout.toMillis());
        this.scheduler = new ScheduledThreadPoolExecutor(1, daemon("hashlock-scheduler"));
        this.scheduler.setRemoveOnCancelPolicy(true);
        this.workers = new ThreadPoolExecutor(b.workers, b.workers, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), daemon("hashlock-worker"));
        this.workers.allowCoreThreadTimeOut(true);
        this.subscriber = new Subscriber(router, scheduler, workers);
    }

    /** A Hashlock with a fresh random id and the default options. */
    public static Hashlock create(Connector connector) {
        return builder(connector).build();
    }

    public static Builder builder(Connector connector) {
        return new Builder(connector);
    }

    /** A lock on {@code name} with this instance's default options. */
    public Lock lock(String name) {
        return lock(name, defaults);
    }

    public Lock lock(String name, LockOptions options) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new Lock(this, Objects.requireNonNull(name), Objects.requireNonNull(options), null);
    }

    /**
     * The leader election on key {@code name}, as one candidate with a fresh
     * id and the default options ({@link Election}).
     */
    public Election election(String name) {
        return election(name, ElectionOptions.defaults());
    }

    public Election election(String name, ElectionOptions options) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new Election(this, Objects.requireNonNull(name), Objects.requireNonNull(options));
    }

    /**
     * The semaphore at {@code name} ({@code SEMAPHORE.*}; Redisson's
     * {@code RSemaphore} and {@code RPermitExpirableSemaphore} on the same
     * name share it), its leases taken with this instance's default options.
     */
    public Semaphore semaphore(String name) {
        return semaphore(name, defaults);
    }

    /** As {@link #semaphore(String)}: {@code options} for its leases (lease, keepalive, replicas, checks, events; not token). */
    public Semaphore semaphore(String name, LockOptions options) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new Semaphore(this, Objects.requireNonNull(name), Objects.requireNonNull(options));
    }

    /** The count-down latch at {@code name} ({@code LATCH.*}; Redisson's {@code RCountDownLatch}). */
    public Latch latch(String name) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new Latch(this, Objects.requireNonNull(name));
    }

    /** The read-write lock at {@code name} ({@code RWLOCK.*}; Redisson's {@code RReadWriteLock}), with the default options. */
    public ReadWriteLock readWriteLock(String name) {
        return readWriteLock(name, defaults);
    }

    public ReadWriteLock readWriteLock(String name, LockOptions options) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new ReadWriteLock(this, Objects.requireNonNull(name), Objects.requireNonNull(options));
    }

    /**
     * The lock of several keys taken all at once or not at all
     * ({@code LOCK.MACQUIRE}/{@code LOCK.MRELEASE}; each key an ordinary
     * lock, as Redisson's {@code RedissonMultiLock} sees it). On a cluster
     * the names must share a slot: give them one hash tag.
     */
    public MultiLock multiLock(String... names) {
        return multiLock(List.of(names), defaults);
    }

    public MultiLock multiLock(List<String> names, LockOptions options) {
        if (closed) throw new IllegalStateException("hashlock is closed");
        return new MultiLock(this, List.copyOf(names), Objects.requireNonNull(options));
    }

    /** This instance's id: owners are {@code <id>:<thread id>}. */
    public String id() {
        return id;
    }

    public Connector connector() {
        return connector;
    }

    /** Connections hashlock opened so far (each wait or KEEPALIVE hold reuses a pooled one when it can). */
    public long connectionsOpened() {
        return pool.opened();
    }

    /**
     * Grants that reached a wait after it was given up (interrupted, timed out
     * on the client) and were given back at once.
     */
    public long grantsGivenBack() {
        return givenBack.get();
    }

    void countGivenBack() {
        givenBack.incrementAndGet();
    }

    /** Idle pooled connections now. */
    public int idleConnections() {
        return pool.idleCount();
    }

    /**
     * Closes every connection of this instance: locks tied to one (KEEPALIVE)
     * are released by the server at once; watchdog-renewed ones lapse at the
     * end of their lease. Their loss signals fire.
     */
    @Override
    public void close() {
        closed = true;
        List<Lock.Hold> all = new ArrayList<>(holds.values());
        holds.clear();
        for (Lock.Hold h : all) h.abandon("hashlock was closed");
        List<Tenure> family = new ArrayList<>(tenures);
        tenures.clear();
        owned.clear();
        for (Tenure t : family) t.abandon("hashlock was closed");
        subscriber.close();
        pool.close();
        scheduler.shutdownNow();
        workers.shutdownNow();
    }

    boolean closed() {
        return closed;
    }

    Router router() {
        return router;
    }

    Subscriber subscriber() {
        return subscriber;
    }

    ScheduledExecutorService scheduler() {
        return scheduler;
    }

    ExecutorService workers() {
        return workers;
    }

    Map<HoldKey, Lock.Hold> holds() {
        return holds;
    }

    java.util.Set<Tenure> tenures() {
        return tenures;
    }

    Map<OwnerKey, Tenure> owned() {
        return owned;
    }

    private static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    public static final class Builder {
        private final Connector connector;
        private String id = UUID.randomUUID().toString();
        private LockOptions defaults = LockOptions.defaults();
        private int maxIdlePerNode = 16;
        private Duration commandTimeout = Duration.ofSeconds(10);
        private int workers = 2;

        private Builder(Connector connector) {
            this.connector = Objects.requireNonNull(connector);
        }

        /**
         * The id owners are made from (default: a random UUID). Give it a
         * Redisson client's {@code getId()} and a thread re-enters, through
         * hashlock, a lock it holds through that Redisson client (and the
         * other way round): they are the same owner.
         */
        public Builder id(String id) {
            if (id.isEmpty()) throw new IllegalArgumentException("id must not be empty");
            this.id = id;
            return this;
        }

        /** Options of {@link Hashlock#lock(String)}. */
        public Builder lockOptions(LockOptions options) {
            this.defaults = Objects.requireNonNull(options);
            return this;
        }

        /** Idle connections kept per node (default 16); more are closed when given back. */
        public Builder maxIdlePerNode(int n) {
            if (n < 0) throw new IllegalArgumentException("maxIdlePerNode must be >= 0");
            this.maxIdlePerNode = n;
            return this;
        }

        /**
         * How long connecting, and a command that does not wait in the server
         * (everything but a blocking acquire), may take before hashlock gives
         * up on the connection (default 10 s).
         */
        public Builder commandTimeout(Duration timeout) {
            if (timeout.toMillis() <= 0) throw new IllegalArgumentException("commandTimeout must be positive");
            this.commandTimeout = timeout;
            return this;
        }

        /** Threads that check held locks (default 2). */
        public Builder checkThreads(int n) {
            if (n < 1) throw new IllegalArgumentException("checkThreads must be >= 1");
            this.workers = n;
            return this;
        }

        public Hashlock build() {
            return new Hashlock(this);
        }
    }
}
