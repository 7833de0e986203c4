package io.hashlock.interop;

import io.hashlock.testing.TestServer;
import java.util.EnumMap;
import java.util.Map;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** Real Redisson clients for the interop tests, one per server (and watchdog timeout), shut down at the end. */
final class RedissonClients {
    private RedissonClients() {}

    /** The Redisson on the class path (the build's redisson.version). */
    static final String VERSION = System.getProperty("redisson.version", "?");

    private static final Map<TestServer.Kind, RedissonClient> SHARED = new EnumMap<>(TestServer.Kind.class);

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(RedissonClients::shutdownAll));
    }

    /** A Redisson client with the default watchdog (30 s), shared by the tests of one server. */
    static synchronized RedissonClient shared(TestServer s) {
        RedissonClient r = SHARED.get(s.kind);
        if (r == null || r.isShutdown()) {
            r = create(s.port, 30_000);
            SHARED.put(s.kind, r);
        }
        return r;
    }

    /** A new client (shut it down): {@code watchdogMs} is its lockWatchdogTimeout. */
    static RedissonClient create(int port, long watchdogMs) {
        Config c = new Config();
        c.setThreads(2);
        c.setNettyThreads(4);
        c.setLockWatchdogTimeout(watchdogMs);
        c.useSingleServer()
                .setAddress("redis://127.0.0.1:" + port)
                .setConnectionMinimumIdleSize(2)
                .setConnectionPoolSize(8)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(4);
        return Redisson.create(c);
    }

    static synchronized void shutdownAll() {
        for (RedissonClient r : SHARED.values()) r.shutdown();
        SHARED.clear();
    }
}
