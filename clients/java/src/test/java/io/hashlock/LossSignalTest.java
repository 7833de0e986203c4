package io.hashlock;

import static io.hashlock.LockTest.info;
import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.jedis.JedisConnector;
import io.hashlock.lettuce.LettuceConnector;
import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.Proxy;
import io.hashlock.testing.TestServer;
import io.lettuce.core.RedisURI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;

/**
 * The loss signal fires on every way a hold can end other than by its own
 * release, with each adapter: the connection closed by the server
 * (CLIENT KILL), reset, broken by bytes that are not RESP, the server shut
 * down; the lock force-released, its lease lapsed, its renewal refused or
 * impossible. unlock() then throws instead of swallowing the loss.
 */
class LossSignalTest {
    /** Checks run this often in these tests; the default is 1 s. */
    static final LockOptions FAST = LockOptions.builder().checkInterval(Duration.ofMillis(50)).build();

    static Connector named(Connectors via, int port, String name) {
        return switch (via) {
            case JEDIS -> JedisConnector.standalone(new HostAndPort("127.0.0.1", port),
                    DefaultJedisClientConfig.builder().clientName(name).build());
            case LETTUCE -> LettuceConnector.standalone(RedisURI.builder().withHost("127.0.0.1").withPort(port).withClientName(name).build());
        };
    }

    /** Waits for the signal; returns the loss and how long it took to arrive. */
    static LockLostException awaitLoss(LossSignal signal, long ms) throws Exception {
        return signal.future().get(ms, TimeUnit.MILLISECONDS);
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void connectionKilledByTheServer(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("kill");
        String name = "victim-" + key.substring(5);
        try (Hashlock h = Hashlock.builder(named(via, s.port, name)).lockOptions(FAST).build()) {
            Lock lock = h.lock(key);
            lock.lock();
            LossSignal signal = lock.signal();
            assertFalse(signal.isLost());
            long t0 = System.nanoTime();
            for (String line : text(s.cmd("CLIENT", "LIST")).split("\n")) {
                if (line.contains(" name=" + name + " ")) s.cmd("CLIENT", "KILL", "ID", line.split(" ")[0].substring(3));
            }
            LockLostException e = awaitLoss(signal, 2000);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(LossReason.CONNECTION_LOST, e.reason());
            assertTrue(ms < 1000, ms + " ms");
            assertNull(info(s, key), "the server released the tied lock with its connection");
            LockLostException thrown = assertThrows(LockLostException.class, lock::unlock);
            assertEquals(e, thrown);
            assertThrows(IllegalMonitorStateException.class, lock::unlock, "the hold is over");
            // The lock can be taken again afterwards.
            lock.lock();
            assertFalse(lock.signal().isLost());
            lock.unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void connectionResetOrGarbled(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (String how : new String[] {"reset", "garbage"}) {
            String key = Matrix.key(how);
            try (Proxy proxy = new Proxy(s.port); Hashlock h = Hashlock.builder(via.standalone(proxy.port())).lockOptions(FAST).build()) {
                Lock lock = h.lock(key);
                lock.lock();
                LossSignal signal = lock.signal();
                if (how.equals("reset")) proxy.resetAll();
                else proxy.injectToClients("%not-resp\r\n".getBytes(StandardCharsets.US_ASCII));
                LockLostException e = awaitLoss(signal, 2000);
                assertEquals(LossReason.CONNECTION_LOST, e.reason(), how);
                // The connection is closed by the proxy (reset) or by hashlock (garbage): the server lets go.
                assertTrue(waitFor(2000, () -> info(s, key) == null), how + ": lock still held");
                assertThrows(LockLostException.class, lock::unlock, how);
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void serverShutdown(TestServer.Kind kind, Connectors via) throws Exception {
        try (TestServer s = TestServer.start(kind); Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(FAST).build()) {
            Lock lock = h.lock("k");
            lock.lock();
            LossSignal signal = lock.signal();
            try {
                s.cmd("SHUTDOWN", "NOSAVE");
            } catch (RuntimeException expected) {
                // the connection closes under the command
            }
            LockLostException e = awaitLoss(signal, 3000);
            assertEquals(LossReason.CONNECTION_LOST, e.reason());
            assertThrows(LockLostException.class, lock::unlock);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void forceReleased(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean ka : new boolean[] {true, false}) {
            String key = Matrix.key("forced");
            try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(FAST.toBuilder().keepalive(ka).build()).build()) {
                Lock lock = h.lock(key);
                lock.lock();
                LossSignal signal = lock.signal();
                assertEquals(1L, s.cmd("LOCK.FORCERELEASE", key));
                LockLostException e = awaitLoss(signal, 2000);
                assertEquals(LossReason.NOT_HELD, e.reason(), "keepalive " + ka);
                assertThrows(LockLostException.class, lock::unlock);
            }
        }
        // Without the background check and the events, unlock() itself says so (the server's NOTOWNER).
        String key = Matrix.key("forced");
        try (Hashlock h = Hashlock.builder(via.standalone(s.port))
                .lockOptions(LockOptions.builder().checkInterval(Duration.ofHours(1)).events(false).build()).build()) {
            Lock lock = h.lock(key);
            lock.lock();
            s.cmd("LOCK.FORCERELEASE", key);
            assertThrows(NotOwnerException.class, lock::unlock);
            assertTrue(lock.tryLock(), "a fresh acquisition after the loss");
            lock.unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void leaseLapsed(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        // KEEPALIVE: someone unties it and shortens its lease (LOCK.RENEW without KEEPALIVE).
        String key = Matrix.key("lapsed");
        try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(LockOptions.builder().checkInterval(Duration.ofMillis(300)).build()).build()) {
            Lock lock = h.lock(key);
            lock.lock();
            LossSignal signal = lock.signal();
            assertEquals(1L, s.cmd("LOCK.RENEW", key, lock.owner(), "PX", "30"));
            assertTrue(waitFor(1000, () -> info(s, key) == null), "lapsed");
            LockLostException e = awaitLoss(signal, 2000);
            assertEquals(LossReason.NOT_HELD, e.reason());
            assertThrows(LockLostException.class, lock::unlock);
        }
        // Watchdog: the lease lapses while the server is paused for writes (no renewal gets through).
        String key2 = Matrix.key("lapsed");
        LockOptions watchdog = FAST.toBuilder().keepalive(false).lease(Duration.ofMillis(300)).build();
        try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(watchdog).build()) {
            Lock lock = h.lock(key2);
            lock.lock();
            LossSignal signal = lock.signal();
            s.cmd("DEBUG", "SLEEP", "0.6");
            LockLostException e = awaitLoss(signal, 3000);
            assertTrue(e.reason() == LossReason.NOT_HELD || e.reason() == LossReason.RENEWAL_FAILED, e.toString());
            assertThrows(LockLostException.class, lock::unlock);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void renewalRefusedOrImpossible(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        LockOptions watchdog = FAST.toBuilder().keepalive(false).lease(Duration.ofMillis(600)).build();
        // Refused: the lock now belongs to someone else; the watchdog's LOCK.RENEW answers 0.
        String key = Matrix.key("renew0");
        try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(watchdog).build()) {
            Lock lock = h.lock(key);
            lock.lock();
            LossSignal signal = lock.signal();
            s.cmd("DEL", key);
            s.cmd("HSET", key, "intruder", "1");
            LockLostException e = awaitLoss(signal, 2000);
            assertEquals(LossReason.NOT_HELD, e.reason());
            assertThrows(LockLostException.class, lock::unlock);
            s.cmd("DEL", key);
        }
        // Impossible: no renewal reaches the server for a whole lease (a black hole).
        String key2 = Matrix.key("renewx");
        try (Proxy proxy = new Proxy(s.port);
                Hashlock h = Hashlock.builder(via.standalone(proxy.port())).lockOptions(watchdog).commandTimeout(Duration.ofMillis(150)).build()) {
            Lock lock = h.lock(key2);
            lock.lock();
            LossSignal signal = lock.signal();
            long t0 = System.nanoTime();
            proxy.freeze(true);
            LockLostException e = awaitLoss(signal, 3000);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(LossReason.RENEWAL_FAILED, e.reason());
            assertTrue(ms >= 300 && ms < 1500, ms + " ms: at the end of the lease, not before");
            proxy.freeze(false);
            assertThrows(LockLostException.class, lock::unlock);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void aCleanReleaseIsNoLoss(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("clean");
        try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(FAST).build()) {
            Lock lock = h.lock(key);
            lock.lock();
            LossSignal signal = lock.signal();
            lock.unlock();
            Thread.sleep(200); // several check intervals
            assertFalse(signal.isLost());
            // Its connection went back to the pool; killing idle pooled connections is no loss either.
            assertTrue(h.idleConnections() >= 1);
        }
    }
}
