package io.hashlock;

import java.time.Duration;
import java.util.Objects;

/** How an {@link Election}'s candidate campaigns. Immutable; {@link #builder()} to make one. */
public final class ElectionOptions {
    private static final ElectionOptions DEFAULTS = builder().build();

    private final String id;
    private final long leaseMs;
    private final long checkIntervalMs;

    private ElectionOptions(Builder b) {
        this.id = b.id;
        this.leaseMs = b.leaseMs;
        this.checkIntervalMs = b.checkIntervalMs;
    }

    public static ElectionOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The candidate id, null for a fresh one per Election. */
    public String id() {
        return id;
    }

    public long leaseMs() {
        return leaseMs;
    }

    public long checkIntervalMs() {
        return checkIntervalMs;
    }

    @Override
    public String toString() {
        return "ElectionOptions[id " + id + ", lease " + leaseMs + " ms, check every " + checkIntervalMs + " ms]";
    }

    public static final class Builder {
        private String id;
        private long leaseMs = LockOptions.DEFAULT_LEASE.toMillis();
        private long checkIntervalMs = LockOptions.DEFAULT_CHECK_INTERVAL.toMillis();

        private Builder() {}

        /**
         * The candidate's id: what {@link Election#leader()} and observers
         * report while it leads (default: {@code <Hashlock id>:election:<n>}).
         * It must be unique among the election's candidates.
         */
        public Builder id(String id) {
            if (Objects.requireNonNull(id).isEmpty()) throw new IllegalArgumentException("id must not be empty");
            this.id = id;
            return this;
        }

        /**
         * A term's lease (default 30 s). The server renews it while the
         * leader's connection is open; it is the safety net where the
         * connection's tie cannot follow (a failover, a restart).
         */
        public Builder lease(Duration lease) {
            long ms = lease.toMillis();
            if (ms <= 0) throw new IllegalArgumentException("lease must be positive");
            this.leaseMs = ms;
            return this;
        }

        /** How often a leader's term is looked at besides the events (default 1 s, at most a third of the lease). */
        public Builder checkInterval(Duration interval) {
            long ms = interval.toMillis();
            if (ms <= 0) throw new IllegalArgumentException("checkInterval must be positive");
            this.checkIntervalMs = ms;
            return this;
        }

        public ElectionOptions build() {
            return new ElectionOptions(this);
        }
    }
}
