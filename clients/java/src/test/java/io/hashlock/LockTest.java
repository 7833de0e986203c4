package io.hashlock;

import static io.hashlock.testing.TestServer.cmd;
import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The Lock against real servers, with each adapter. */
class LockTest {

    static LockInfo info(TestServer s, String key) {
        return Lock.parseInfo(s.cmd("LOCK.INFO", key));
    }

    static long waiters(TestServer s, String key) {
        LockInfo i = info(s, key);
        return i == null ? 0 : i.waiters();
    }

    static <T> CompletableFuture<T> onThread(java.util.concurrent.Callable<T> body) {
        return io.hashlock.testing.Threads.onThread(body);
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void excludesReentersAndReleases(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("basic");
        try (Hashlock a = via.hashlock(s.port); Hashlock b = via.hashlock(s.port)) {
            Lock la = a.lock(key);
            Lock lb = b.lock(key);
            assertTrue(la.tryLock());
            assertEquals(a.id() + ":" + Thread.currentThread().getId(), la.owner());
            LockInfo i = info(s, key);
            assertEquals(la.owner(), i.owner());
            assertEquals(1, i.holds());
            assertTrue(i.keepalive(), "KEEPALIVE is the default");
            // The same thread through another Hashlock is another owner.
            assertFalse(lb.tryLock());
            assertFalse(lb.tryLock(50, TimeUnit.MILLISECONDS));
            // Re-entry.
            assertTrue(la.tryLock());
            la.lock();
            assertEquals(3, la.holdCount());
            assertEquals(3, info(s, key).holds());
            assertTrue(la.isHeldByCurrentThread());
            assertFalse(lb.isHeldByCurrentThread());
            assertTrue(lb.isLocked());
            la.unlock();
            la.unlock();
            assertEquals(1, info(s, key).holds());
            la.unlock();
            assertNull(info(s, key));
            assertEquals(0, la.holdCount());
            assertThrows(IllegalMonitorStateException.class, la::unlock);
            assertTrue(lb.tryLock());
            lb.unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void aWaiterQueuesInTheServerAndIsHandedTheLock(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("wait");
        try (Hashlock h = via.hashlock(s.port)) {
            Lock lock = h.lock(key);
            lock.lock();
            String holder = lock.owner();
            AtomicReference<String> waiterOwner = new AtomicReference<>();
            CompletableFuture<Boolean> waited = onThread(() -> {
                waiterOwner.set(lock.owner());
                boolean got = lock.tryLock(10, TimeUnit.SECONDS);
                if (got) {
                    assertEquals(lock.owner(), info(s, key).owner());
                    lock.unlock();
                }
                return got;
            });
            assertTrue(waitFor(5000, () -> waiters(s, key) == 1), "the second thread waits in the server's queue");
            assertEquals(holder, info(s, key).owner());
            lock.unlock();
            assertTrue(waited.get(10, TimeUnit.SECONDS));
            assertNotEquals(holder, waiterOwner.get());
            assertNull(info(s, key));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void aTimedOutWaitReturnsFalseAndKeepsItsConnection(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("timeout");
        try (Hashlock a = via.hashlock(s.port); Hashlock b = via.hashlock(s.port)) {
            a.lock(key).lock();
            Lock lb = b.lock(key);
            assertFalse(lb.tryLock(100, TimeUnit.MILLISECONDS)); // the server's BLOCK ran out
            long opened = b.connectionsOpened();
            for (int i = 0; i < 5; i++) assertFalse(lb.tryLock(20, TimeUnit.MILLISECONDS));
            assertEquals(opened, b.connectionsOpened(), "a wait the server ended leaves a clean connection: reused");
            assertEquals(0, waiters(s, key));
            a.lock(key).unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void watchdogModeRenewsTheLease(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("watchdog");
        LockOptions o = LockOptions.builder().keepalive(false).lease(Duration.ofMillis(600)).build();
        try (Hashlock h = via.hashlock(s.port, o)) {
            Lock lock = h.lock(key);
            lock.lock();
            LockInfo i = info(s, key);
            assertFalse(i.keepalive());
            assertTrue(i.ttlMs() <= 600 && i.ttlMs() > 300, "ttl " + i.ttlMs());
            Thread.sleep(1500); // 2.5 leases: only renewals keep it
            i = info(s, key);
            assertEquals(lock.owner(), i.owner());
            assertTrue(i.ttlMs() > 150, "renewed every third of the lease: ttl " + i.ttlMs());
            assertFalse(lock.signal().isLost());
            lock.unlock();
            assertNull(info(s, key));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void fencingTokensGrowAndShareRedissonsCounter(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("token");
        try (Hashlock h = via.hashlock(s.port, LockOptions.builder().token(true).build())) {
            Lock lock = h.lock(key);
            lock.lock();
            long t1 = lock.token();
            assertTrue(lock.tryLock());
            long t2 = lock.token();
            assertTrue(t2 > t1, t1 + " then " + t2);
            assertEquals(t2, Long.parseLong(text(s.cmd("GET", "redisson_lock_token:{" + key + "}"))));
            assertEquals(t2, info(s, key).token());
            lock.unlock();
            lock.unlock();
            s.cmd("INCR", "redisson_lock_token:{" + key + "}"); // RFencedLock's increment
            lock.lock();
            assertTrue(lock.token() > t2 + 1);
            lock.unlock();
            assertThrows(IllegalMonitorStateException.class, lock::token);
        }
        try (Hashlock h = via.hashlock(s.port)) {
            Lock plain = h.lock(key);
            plain.lock();
            assertThrows(IllegalStateException.class, plain::token);
            plain.unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void threadsAreOwners(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("threads");
        try (Hashlock h = via.hashlock(s.port)) {
            Lock lock = h.lock(key);
            lock.lock();
            // Another thread can neither take nor release this thread's hold.
            assertFalse(onThread(lock::tryLock).get(5, TimeUnit.SECONDS));
            ExecutionException e = assertThrows(ExecutionException.class, () -> onThread(() -> {
                lock.unlock();
                return null;
            }).get(5, TimeUnit.SECONDS));
            assertInstanceOf(IllegalMonitorStateException.class, e.getCause());
            assertEquals(1, info(s, key).holds());
            lock.unlock();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void errorsAreTyped(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String str = Matrix.key("str");
        String hash = Matrix.key("hash");
        s.cmd("SET", str, "x");
        s.cmd("HSET", hash, "a", "1", "b", "2");
        try (Hashlock h = via.hashlock(s.port, LockOptions.builder().keepalive(false).build())) {
            assertThrows(WrongTypeException.class, () -> h.lock(str).tryLock());
            NotLockException nl = assertThrows(NotLockException.class, () -> h.lock(hash).tryLock());
            assertEquals("NOTLOCK", nl.code());
            assertThrows(WrongTypeException.class, () -> h.lock(str).info());
        }
        try (Hashlock h = via.hashlock(s.port)) {
            assertThrows(WrongTypeException.class, () -> h.lock(str).tryLock(), "KEEPALIVE path");
            assertThrows(WrongTypeException.class, () -> h.lock(str).tryLock(1, TimeUnit.SECONDS), "blocking path");
        }
        // REPLICAS with no replica: the grant is undone.
        String key = Matrix.key("replicas");
        try (Hashlock h = via.hashlock(s.port, LockOptions.builder().replicas(1, Duration.ofMillis(100)).build())) {
            assertThrows(NoReplicasException.class, () -> h.lock(key).tryLock());
            assertNull(info(s, key));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void saysWhenTheModuleIsNotLoaded(TestServer.Kind kind, Connectors via) throws Exception {
        try (TestServer bare = TestServer.start(kind, false); Hashlock h = via.hashlock(bare.port)) {
            ModuleNotLoadedException e = assertThrows(ModuleNotLoadedException.class, () -> h.lock("k").tryLock());
            assertTrue(e.getMessage().contains("the hashlock module is not loaded"), e.getMessage());
            assertThrows(ModuleNotLoadedException.class, () -> h.lock("k").lock());
            assertThrows(ModuleNotLoadedException.class, () -> h.lock("k", LockOptions.builder().keepalive(false).build()).tryLock());
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void connectsWithPasswordAndDatabase(TestServer.Kind kind, Connectors via) throws Exception {
        try (TestServer s = TestServer.start(kind, "requirepass", "s3cret")) {
            io.hashlock.Connector c = switch (via) {
                case JEDIS -> io.hashlock.jedis.JedisConnector.standalone(new redis.clients.jedis.HostAndPort("127.0.0.1", s.port),
                        redis.clients.jedis.DefaultJedisClientConfig.builder().password("s3cret").database(3).clientName("hl-test").build());
                case LETTUCE -> io.hashlock.lettuce.LettuceConnector.standalone(
                        io.lettuce.core.RedisURI.builder().withHost("127.0.0.1").withPort(s.port).withPassword("s3cret".toCharArray())
                                .withDatabase(3).withClientName("hl-test").build());
            };
            try (Hashlock h = Hashlock.create(c); redis.clients.jedis.Jedis admin = s.jedis("s3cret")) {
                admin.select(3);
                Lock lock = h.lock("k");
                lock.lock();
                assertEquals(lock.owner(), text(((List<?>) cmd(admin, "HKEYS", "k")).get(0)), "in database 3");
                String clients = text(cmd(admin, "CLIENT", "LIST"));
                assertTrue(clients.contains("name=hl-test"), clients);
                lock.unlock();
            }
        }
    }
}
