package io.hashlock;

import static io.hashlock.LockTest.onThread;
import static io.hashlock.testing.TestServer.text;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Connections are reused: a cleanly released lock gives its connection back
 * to the pool, so in steady state acquisitions open no connection at all —
 * counted by hashlock and by the server itself (total_connections_received).
 */
class PoolTest {

    static long serverConnections(TestServer s) {
        for (String line : text(s.cmd("INFO", "stats")).split("\r\n")) {
            if (line.startsWith("total_connections_received:")) return Long.parseLong(line.substring(line.indexOf(':') + 1));
        }
        throw new AssertionError("no total_connections_received");
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void steadyStateOpensNoConnection(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("pool");
        for (boolean ka : new boolean[] {true, false}) {
            try (Hashlock h = via.hashlock(s.port, LockOptions.builder().keepalive(ka).build())) {
                Lock lock = h.lock(key);
                for (int i = 0; i < 50; i++) {
                    lock.lock();
                    lock.unlock();
                }
                long opened = h.connectionsOpened();
                long server = serverConnections(s);
                int n = 1000;
                long t0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    lock.lock(); // BLOCK 0 on a pooled connection
                    lock.unlock();
                    assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
                    assertTrue(lock.tryLock()); // re-entry
                    lock.unlock();
                    lock.unlock();
                }
                double secs = (System.nanoTime() - t0) / 1e9;
                long newOpened = h.connectionsOpened() - opened;
                long newServer = serverConnections(s) - server - 1; // our INFO connection
                System.out.printf("pool %s %s keepalive=%s: %d acquire/release pairs, %.0f pairs/s, %d new connections (server saw %d)%n",
                        kind, via, ka, 2 * n, 2 * n / secs, newOpened, newServer);
                assertEquals(0, newOpened, "hashlock opened connections in steady state");
                assertEquals(0, newServer, "the server saw new connections in steady state");
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void contendedWaitsReuseConnectionsToo(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("pool-contended");
        try (Hashlock h = via.hashlock(s.port)) {
            Lock lock = h.lock(key);
            int threads = 4;
            int rounds = 200;
            Runnable work = () -> {
                for (int i = 0; i < rounds; i++) {
                    lock.lock();
                    lock.unlock();
                }
            };
            work.run(); // warm up: one connection
            CompletableFuture<?>[] warm = new CompletableFuture<?>[threads];
            for (int t = 0; t < threads; t++) warm[t] = onThread(() -> {
                work.run();
                return null;
            });
            CompletableFuture.allOf(warm).get(60, TimeUnit.SECONDS);
            long opened = h.connectionsOpened();
            assertTrue(opened <= threads + 1, "at most one connection per concurrent holder or waiter: " + opened);
            CompletableFuture<?>[] fs = new CompletableFuture<?>[threads];
            for (int t = 0; t < threads; t++) fs[t] = onThread(() -> {
                work.run();
                return null;
            });
            CompletableFuture.allOf(fs).get(60, TimeUnit.SECONDS);
            assertEquals(opened, h.connectionsOpened(), "contended waits opened no new connection");
        }
    }
}
