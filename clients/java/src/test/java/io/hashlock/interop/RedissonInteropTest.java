package io.hashlock.interop;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.Hashlock;
import io.hashlock.Lock;
import io.hashlock.LockInfo;
import io.hashlock.LockOptions;
import io.hashlock.jedis.JedisConnector;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * Real Redisson (RLock, RFencedLock) and hashlock's Lock on the same locks,
 * against the module on Redis 7.0 and Valkey 9.1: each side takes,
 * re-enters, releases and waits on what the other holds; Redisson's waiters
 * wake on native releases (its channel and payload); Redisson's watchdog
 * and KEEPALIVE on one lock.
 */
@Tag("redisson")
class RedissonInteropTest {
    /** Far below any lease here (30 s): a waiter that missed its wake-up would sleep for the lease. */
    static final long WAKE_MS = 2_000;

    static LockInfo info(TestServer s, String key) {
        Object r = s.cmd("LOCK.INFO", key);
        if (r == null) return null;
        List<?> l = (List<?>) r;
        return new LockInfo(text(l.get(1)), (Long) l.get(3), (Long) l.get(5), (Long) l.get(7), (Long) l.get(9) == 1, (Long) l.get(11));
    }

    static Hashlock hashlock(TestServer s) {
        return Hashlock.create(JedisConnector.standalone("127.0.0.1", s.port));
    }

    static Hashlock hashlock(TestServer s, LockOptions o) {
        return Hashlock.builder(JedisConnector.standalone("127.0.0.1", s.port)).lockOptions(o).build();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void eachSideExcludesTheOther(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("excl");
        try (Hashlock h = hashlock(s)) {
            Lock native_ = h.lock(key);
            RLock rlock = redisson.getLock(key);
            // Redisson holds: hashlock cannot take it, in any way.
            rlock.lock();
            String redissonOwner = redisson.getId() + ":" + Thread.currentThread().getId();
            assertEquals(redissonOwner, info(s, key).owner(), "Redisson's owner format");
            assertFalse(onThread(native_::tryLock).get(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> native_.tryLock(100, TimeUnit.MILLISECONDS)).get(5, TimeUnit.SECONDS));
            assertTrue(native_.isLocked());
            // Re-entry on the Redisson side, then its release frees it for hashlock.
            rlock.lock();
            assertEquals(2, rlock.getHoldCount());
            rlock.unlock();
            rlock.unlock();
            assertTrue(native_.tryLock());
            // hashlock holds: Redisson cannot take it.
            assertTrue(rlock.isLocked());
            assertFalse(rlock.isHeldByCurrentThread());
            assertFalse(onThread(() -> redisson.getLock(key).tryLock()).get(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> redisson.getLock(key).tryLock(200, TimeUnit.MILLISECONDS)).get(5, TimeUnit.SECONDS));
            assertTrue(native_.tryLock()); // re-entry
            assertEquals(2, info(s, key).holds());
            native_.unlock();
            native_.unlock();
            assertTrue(rlock.tryLock());
            rlock.unlock();
            assertNull(info(s, key));
        }
    }

    /** One owner on both sides: a Hashlock with the Redisson client's id, the same thread. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void reentryAcrossBothSides(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        for (boolean ka : new boolean[] {true, false}) {
            String key = Matrix.key("reenter");
            try (Hashlock h = Hashlock.builder(JedisConnector.standalone("127.0.0.1", s.port)).id(redisson.getId())
                    .lockOptions(LockOptions.builder().keepalive(ka).build()).build()) {
                Lock native_ = h.lock(key);
                RLock rlock = redisson.getLock(key);
                rlock.lock();
                native_.lock(); // re-enters Redisson's hold
                assertEquals(2, info(s, key).holds());
                assertEquals(ka, info(s, key).keepalive());
                assertTrue(rlock.tryLock()); // and Redisson re-enters on top
                assertEquals(3, rlock.getHoldCount());
                native_.unlock();
                assertEquals(2, rlock.getHoldCount());
                assertFalse(info(s, key).keepalive(), "the tie went with hashlock's hold");
                h.close(); // closing hashlock's connections does not touch Redisson's holds
                assertEquals(2, rlock.getHoldCount());
                rlock.unlock();
                rlock.unlock();
                assertNull(info(s, key));
            }
            // The other way round: hashlock first, Redisson re-enters, hashlock releases last.
            try (Hashlock h = Hashlock.builder(JedisConnector.standalone("127.0.0.1", s.port)).id(redisson.getId())
                    .lockOptions(LockOptions.builder().keepalive(ka).build()).build()) {
                Lock native_ = h.lock(key);
                RLock rlock = redisson.getLock(key);
                native_.lock();
                rlock.lock();
                assertEquals(2, info(s, key).holds());
                rlock.unlock();
                assertEquals(1, info(s, key).holds());
                native_.unlock();
                assertNull(info(s, key));
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void redissonWaitersWakeOnNativeReleases(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        // Each way the native side can free the lock: unlock, force-release, and its KEEPALIVE connection closing.
        for (String how : new String[] {"unlock", "forceUnlock", "connection closed"}) {
            String key = Matrix.key("wake");
            Hashlock h = hashlock(s);
            CountDownLatch held = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            Lock native_ = h.lock(key);
            CompletableFuture<Long> holder = onThread(() -> {
                native_.lock();
                held.countDown();
                release.await();
                long t = System.nanoTime();
                switch (how) {
                    case "unlock" -> native_.unlock();
                    case "forceUnlock" -> native_.forceUnlock();
                    default -> h.close();
                }
                return t;
            });
            assertTrue(held.await(5, TimeUnit.SECONDS));
            assertTrue(info(s, key).ttlMs() > 20_000, "the lease a waiter would otherwise sleep through");
            CountDownLatch subscribed = new CountDownLatch(1);
            CompletableFuture<Long> waiter = onThread(() -> {
                RLock r = redisson.getLock(key);
                subscribed.countDown();
                r.lock(); // Redisson's own wait: subscribe, try, sleep until the message or the PTTL
                long t = System.nanoTime();
                r.unlock();
                return t;
            });
            assertTrue(subscribed.await(5, TimeUnit.SECONDS));
            Thread.sleep(300); // Redisson has tried, subscribed and sleeps on its latch
            assertFalse(waiter.isDone());
            release.countDown();
            long freed = holder.get(5, TimeUnit.SECONDS);
            long woke = waiter.get(10, TimeUnit.SECONDS);
            long ms = (woke - freed) / 1_000_000;
            System.out.printf("redisson %s %s: a Redisson waiter woke %d ms after the native %s%n", RedissonClients.VERSION, kind, ms, how);
            assertTrue(ms < WAKE_MS, how + ": woke after " + ms + " ms");
            if (!how.equals("connection closed")) h.close();
        }
        // The channel and payload, as a Redisson subscriber sees them.
        String key = Matrix.key("channel");
        CompletableFuture<String> message = new CompletableFuture<>();
        var topic = redisson.getTopic("redisson_lock__channel:{" + key + "}", new org.redisson.client.codec.StringCodec());
        int id = topic.addListener(String.class, (channel, msg) -> message.complete(channel + " " + msg));
        try (Hashlock h = hashlock(s)) {
            Lock l = h.lock(key);
            l.lock();
            l.unlock();
            assertEquals("redisson_lock__channel:{" + key + "} 0", message.get(5, TimeUnit.SECONDS));
        } finally {
            topic.removeListener(id);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void nativeWaitersAreServedOnRedissonReleases(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        for (String how : new String[] {"unlock", "forceUnlock", "lease lapsed"}) {
            String key = Matrix.key("served");
            RLock rlock = redisson.getLock(key);
            if (how.equals("lease lapsed")) rlock.lock(400, TimeUnit.MILLISECONDS);
            else rlock.lock();
            try (Hashlock h = hashlock(s)) {
                Lock native_ = h.lock(key);
                CompletableFuture<Long> waiter = onThread(() -> {
                    assertTrue(native_.tryLock(10, TimeUnit.SECONDS));
                    long t = System.nanoTime();
                    assertEquals(native_.owner(), info(s, key).owner());
                    native_.unlock();
                    return t;
                });
                assertTrue(waitFor(5000, () -> info(s, key) != null && info(s, key).waiters() == 1), "queued in the server");
                long freed = System.nanoTime();
                switch (how) {
                    case "unlock" -> rlock.unlock();
                    case "forceUnlock" -> assertTrue(rlock.forceUnlock());
                    default -> freed = freed + info(s, key).ttlMs() * 1_000_000L;
                }
                long ms = (waiter.get(10, TimeUnit.SECONDS) - freed) / 1_000_000;
                System.out.printf("redisson %s %s: a native waiter was served %d ms after Redisson's %s%n", RedissonClients.VERSION, kind, ms, how);
                assertTrue(ms < 500, how + ": " + ms + " ms");
            }
        }
    }

    /**
     * Redisson's watchdog (shortened to 1.5 s here) and the server's KEEPALIVE
     * renewals keep one lock alive past many leases, whichever side holds
     * it, and each side's waiter gets it when the other lets go.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void watchdogAndKeepaliveOnTheSameLock(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.create(s.port, 1_500);
        String key = Matrix.key("watchdog");
        try (Hashlock h = hashlock(s, LockOptions.builder().lease(Duration.ofMillis(1_500)).build())) {
            RLock rlock = redisson.getLock(key);
            Lock native_ = h.lock(key);
            rlock.lock(); // watchdog: lease 1.5 s, renewed every 0.5 s
            CompletableFuture<Boolean> nativeWaiter = onThread(() -> {
                boolean got = native_.tryLock(20, TimeUnit.SECONDS);
                if (!got) return false;
                // KEEPALIVE: lease 1.5 s, renewed by the server; hold it for 3 leases.
                Thread.sleep(4_500);
                boolean stillMine = native_.isHeldByCurrentThread() && !native_.signal().isLost();
                native_.unlock();
                return stillMine;
            });
            Thread.sleep(4_500); // 3 leases: only the watchdog keeps Redisson's hold
            assertEquals(redisson.getId() + ":" + Thread.currentThread().getId(), info(s, key).owner());
            assertEquals(1, info(s, key).waiters());
            assertFalse(nativeWaiter.isDone());
            rlock.unlock();
            assertTrue(waitFor(2000, () -> info(s, key) != null && info(s, key).keepalive()), "the native waiter got it, tied");
            // Meanwhile a Redisson waiter cannot get it: the server renews the 1.5 s lease.
            CompletableFuture<Long> redissonWaiter = onThread(() -> {
                RLock r = redisson.getLock(key);
                assertTrue(r.tryLock(20, TimeUnit.SECONDS));
                long t = System.nanoTime();
                r.unlock();
                return t;
            });
            assertTrue(nativeWaiter.get(15, TimeUnit.SECONDS), "held for 3 leases by the server's renewals alone");
            long nativeReleased = System.nanoTime();
            assertTrue((redissonWaiter.get(5, TimeUnit.SECONDS) - nativeReleased) / 1_000_000 < WAKE_MS);
        } finally {
            redisson.shutdown();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void fencedLockSharesTheTokenSequence(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("fenced");
        try (Hashlock h = hashlock(s, LockOptions.builder().token(true).build())) {
            RFencedLock fenced = redisson.getFencedLock(key);
            Lock native_ = h.lock(key);
            long t1 = fenced.lockAndGetToken();
            assertFalse(onThread(native_::tryLock).get(5, TimeUnit.SECONDS), "RFencedLock excludes hashlock");
            fenced.unlock();
            native_.lock();
            long t2 = native_.token();
            assertTrue(t2 > t1, t1 + " then " + t2);
            assertTrue(native_.tryLock());
            long t3 = native_.token();
            assertTrue(t3 > t2, "re-entry takes a token too");
            // (Not tryLockAndGetToken() without a wait time: on a lock held by another owner it
            // does not return, on plain Redis too, in Redisson 4.7.0 and 3.23.5.)
            assertFalse(onThread(() -> redisson.getFencedLock(key).tryLock()).get(5, TimeUnit.SECONDS), "hashlock excludes RFencedLock");
            assertEquals(null, onThread(() -> redisson.getFencedLock(key).tryLockAndGetToken(100, TimeUnit.MILLISECONDS)).get(5, TimeUnit.SECONDS));
            // A Redisson fenced waiter wakes on the native release.
            CompletableFuture<Long> waiter = onThread(() -> {
                RFencedLock f = redisson.getFencedLock(key);
                Long t = f.tryLockAndGetToken(20, TimeUnit.SECONDS);
                f.unlock();
                return t;
            });
            Thread.sleep(200);
            native_.unlock();
            native_.unlock();
            long t4 = waiter.get(WAKE_MS, TimeUnit.MILLISECONDS);
            assertTrue(t4 > t3, t3 + " then " + t4);
            assertEquals(t4, info(s, key) == null ? Long.parseLong(text(s.cmd("GET", "redisson_lock_token:{" + key + "}"))) : -1);
            native_.lock();
            assertTrue(native_.token() > t4);
            native_.unlock();
        }
    }
}
