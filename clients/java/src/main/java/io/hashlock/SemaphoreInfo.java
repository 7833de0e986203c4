package io.hashlock;

/**
 * {@code SEMAPHORE.INFO}: the permits available now (may be negative after
 * {@link Semaphore#addPermits} with a negative delta), the leased permits
 * that have not lapsed, the clients queued, the leased permits tied to a
 * connection (KEEPALIVE), and the key's time to live ({@code ttlMs}, -1 =
 * no expiry).
 */
public record SemaphoreInfo(long available, long leased, long waiters, long keepalive, long ttlMs) {
    static SemaphoreInfo parse(Object reply) {
        if (reply == null) return null;
        if (!(reply instanceof java.util.List<?> l)) throw new HashlockException("SEMAPHORE.INFO: unexpected reply " + io.hashlock.internal.Resp.text(reply));
        long available = 0, leased = 0, waiters = 0, keepalive = 0, ttl = -1;
        for (int i = 0; i + 1 < l.size(); i += 2) {
            Object v = l.get(i + 1);
            if (!(v instanceof Long n)) continue;
            switch (io.hashlock.internal.Resp.text(l.get(i))) {
                case "available" -> available = n;
                case "leased" -> leased = n;
                case "waiters" -> waiters = n;
                case "keepalive" -> keepalive = n;
                case "ttl" -> ttl = n;
                default -> {
                    // fields are only ever appended
                }
            }
        }
        return new SemaphoreInfo(available, leased, waiters, keepalive, ttl);
    }
}
