package io.hashlock;

/**
 * {@code RWLOCK.INFO}: the mode ({@code "read"} or {@code "write"}), the
 * writer's owner id (null in read mode) and its holds, the number of
 * distinct reader owners and their holds in all, the lease left
 * ({@code ttlMs}), the clients queued, and the number of owners whose holds
 * are tied to a connection (KEEPALIVE).
 */
public record RwLockInfo(String mode, String writer, long writeHolds, long readers, long readHolds, long ttlMs, long waiters, long keepalive) {
    static RwLockInfo parse(Object reply) {
        if (reply == null) return null;
        if (!(reply instanceof java.util.List<?> l)) throw new HashlockException("RWLOCK.INFO: unexpected reply " + io.hashlock.internal.Resp.text(reply));
        String mode = null, writer = null;
        long writeHolds = 0, readers = 0, readHolds = 0, ttl = -1, waiters = 0, keepalive = 0;
        for (int i = 0; i + 1 < l.size(); i += 2) {
            String f = io.hashlock.internal.Resp.text(l.get(i));
            Object v = l.get(i + 1);
            switch (f) {
                case "mode" -> mode = io.hashlock.internal.Resp.text(v);
                case "writer" -> writer = v == null ? null : io.hashlock.internal.Resp.text(v);
                default -> {
                    if (!(v instanceof Long n)) break;
                    switch (f) {
                        case "writeholds" -> writeHolds = n;
                        case "readers" -> readers = n;
                        case "readholds" -> readHolds = n;
                        case "ttl" -> ttl = n;
                        case "waiters" -> waiters = n;
                        case "keepalive" -> keepalive = n;
                        default -> {
                            // fields are only ever appended
                        }
                    }
                }
            }
        }
        return new RwLockInfo(mode, writer, writeHolds, readers, readHolds, ttl, waiters, keepalive);
    }
}
