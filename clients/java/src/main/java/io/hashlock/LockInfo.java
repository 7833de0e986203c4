package io.hashlock;

/**
 * {@code LOCK.INFO}: the holder, its hold count, the lease left
 * ({@code ttlMs}, -1 = no expiry), the clients queued, whether the lock is
 * tied to a connection (KEEPALIVE), and the last fencing token issued for
 * the key (0 if none).
 */
public record LockInfo(String owner, long holds, long ttlMs, long waiters, boolean keepalive, long token) {}
