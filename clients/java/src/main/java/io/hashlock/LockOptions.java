package io.hashlock;

import java.time.Duration;
import java.util.Objects;

/** How a {@link Lock} takes and keeps its lock. Immutable; {@link #builder()} to make one. */
public final class LockOptions {
    /** Redisson's watchdog lease and the module's default. */
    public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
    public static final Duration DEFAULT_CHECK_INTERVAL = Duration.ofSeconds(1);
    public static final Duration DEFAULT_REPLICAS_TIMEOUT = Duration.ofSeconds(1);

    private static final LockOptions DEFAULTS = builder().build();

    private final long leaseMs;
    private final boolean keepalive;
    private final boolean token;
    private final int replicas;
    private final long replicasTimeoutMs;
    private final long checkIntervalMs;
    private final boolean events;

    private LockOptions(Builder b) {
        this.leaseMs = b.leaseMs;
        this.keepalive = b.keepalive;
        this.token = b.token;
        this.replicas = b.replicas;
        this.replicasTimeoutMs = b.replicasTimeoutMs;
        this.checkIntervalMs = b.checkIntervalMs;
        this.events = b.events;
    }

    public static LockOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    public long leaseMs() {
        return leaseMs;
    }

    public boolean keepalive() {
        return keepalive;
    }

    public boolean token() {
        return token;
    }

    /** REPLICAS n; -1 when not asked for (the server's lock.replicas config applies). */
    public int replicas() {
        return replicas;
    }

    public long replicasTimeoutMs() {
        return replicasTimeoutMs;
    }

    public long checkIntervalMs() {
        return checkIntervalMs;
    }

    /** Whether a held lock also watches its key's lifecycle keyspace events (default true). */
    public boolean events() {
        return events;
    }

    public Builder toBuilder() {
        Builder b = new Builder();
        b.leaseMs = leaseMs;
        b.keepalive = keepalive;
        b.token = token;
        b.replicas = replicas;
        b.replicasTimeoutMs = replicasTimeoutMs;
        b.checkIntervalMs = checkIntervalMs;
        b.events = events;
        return b;
    }

    @Override
    public String toString() {
        return "LockOptions[lease " + leaseMs + " ms, keepalive " + keepalive + ", token " + token
                + (replicas >= 0 ? ", replicas " + replicas + " within " + replicasTimeoutMs + " ms" : "")
                + ", check every " + checkIntervalMs + " ms" + (events ? "" : ", no events") + "]";
    }

    public static final class Builder {
        private long leaseMs = DEFAULT_LEASE.toMillis();
        private boolean keepalive = true;
        private boolean token;
        private int replicas = -1;
        private long replicasTimeoutMs = DEFAULT_REPLICAS_TIMEOUT.toMillis();
        private long checkIntervalMs = DEFAULT_CHECK_INTERVAL.toMillis();
        private boolean events = true;

        private Builder() {}

        /**
         * True (default): while held, the lock also watches its key's
         * lifecycle keyspace events (on the Hashlock's one subscriber
         * connection per node) and looks at itself as soon as one arrives,
         * so a force-release or an expiry fires the loss signal as it
         * happens. Needs {@code notify-keyspace-events} with K (or E) and d
         * on the server; without, nothing arrives and the periodic check
         * finds the loss. False: the periodic check only.
         */
        public Builder events(boolean events) {
            this.events = events;
            return this;
        }

        /**
         * The lease every acquisition and renewal sets (default 30 s). With
         * KEEPALIVE the server renews it while the hold's connection is open;
         * it only matters where the tie cannot follow (failover, restart).
         */
        public Builder lease(Duration lease) {
            long ms = lease.toMillis();
            if (ms <= 0) throw new IllegalArgumentException("lease must be positive");
            this.leaseMs = ms;
            return this;
        }

        /**
         * True (default): tie the lock to a connection of its own; the server
         * renews the lease while it is open and releases the lock the moment
         * it closes (process killed, network lost). No thread renews. False:
         * a watchdog renews the lease every third of it instead.
         */
        public Builder keepalive(boolean keepalive) {
            this.keepalive = keepalive;
            return this;
        }

        /**
         * Ask for a fencing token with every acquisition (re-entry included):
         * {@link Lock#token()}, increasing with every acquisition of this lock,
         * shared with Redisson's {@code RFencedLock}.
         */
        public Builder token(boolean token) {
            this.token = token;
            return this;
        }

        /**
         * REPLICAS n ms: the server answers a grant (or renewal) only once
         * {@code n} replicas have it, else undoes it ({@link NoReplicasException}).
         */
        public Builder replicas(int n, Duration timeout) {
            if (n < 0) throw new IllegalArgumentException("replicas must be >= 0");
            long ms = timeout.toMillis();
            if (ms <= 0) throw new IllegalArgumentException("the replicas timeout must be positive");
            this.replicas = n;
            this.replicasTimeoutMs = ms;
            return this;
        }

        /**
         * How often a held lock is checked for a loss its connection does not
         * show (force-release, a lapsed lease, a failed renewal); at most a
         * third of the lease. Default 1 s.
         */
        public Builder checkInterval(Duration interval) {
            long ms = interval.toMillis();
            if (ms <= 0) throw new IllegalArgumentException("checkInterval must be positive");
            this.checkIntervalMs = ms;
            return this;
        }

        public LockOptions build() {
            return new LockOptions(this);
        }
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof LockOptions x)) return false;
        return leaseMs == x.leaseMs && keepalive == x.keepalive && token == x.token && replicas == x.replicas
                && replicasTimeoutMs == x.replicasTimeoutMs && checkIntervalMs == x.checkIntervalMs && events == x.events;
    }

    @Override
    public int hashCode() {
        return Objects.hash(leaseMs, keepalive, token, replicas, replicasTimeoutMs, checkIntervalMs, events);
    }
}
