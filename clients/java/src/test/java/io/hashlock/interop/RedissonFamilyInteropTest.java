package io.hashlock.interop;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.Hashlock;
import io.hashlock.Latch;
import io.hashlock.Lease;
import io.hashlock.LockLostException;
import io.hashlock.LockOptions;
import io.hashlock.LossReason;
import io.hashlock.MultiLock;
import io.hashlock.ReadWriteLock;
import io.hashlock.Semaphore;
import io.hashlock.jedis.JedisConnector;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.Race;
import io.hashlock.testing.TestServer;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * Real Redisson (RSemaphore, RPermitExpirableSemaphore, RCountDownLatch,
 * RReadWriteLock, RedissonMultiLock) and hashlock's Semaphore, Lease, Latch,
 * ReadWriteLock and MultiLock on the same objects, against the module on
 * Redis 7.0 and Valkey 9.1: each side takes, releases and waits on what the
 * other holds, and Redisson's waiters wake on native releases (within
 * {@link #WAKE_MS}, far below any of Redisson's own retry periods here).
 */
@Tag("redisson")
class RedissonFamilyInteropTest {
    static final long WAKE_MS = 2_000;

    static Hashlock hashlock(TestServer s) {
        return Hashlock.create(JedisConnector.standalone("127.0.0.1", s.port));
    }

    static Hashlock hashlock(TestServer s, LockOptions o) {
        return Hashlock.builder(JedisConnector.standalone("127.0.0.1", s.port)).lockOptions(o).build();
    }

    static long ms(long t0) {
        return (System.nanoTime() - t0) / 1_000_000;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void rsemaphore(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("rsem");
        try (Hashlock h = hashlock(s)) {
            RSemaphore r = redisson.getSemaphore(key);
            Semaphore n = h.semaphore(key);
            assertTrue(r.trySetPermits(3));
            assertFalse(n.trySetPermits(9), "Redisson set it");
            assertEquals(3, n.availablePermits());
            assertTrue(n.tryAcquire(2));
            assertEquals(1, r.availablePermits());
            assertTrue(r.tryAcquire());
            assertFalse(n.tryAcquire());
            assertFalse(r.tryAcquire());
            // A Redisson waiter wakes on a native release.
            CompletableFuture<Long> rw = onThread(() -> {
                long t0 = System.nanoTime();
                assertTrue(r.tryAcquire(2, 30, TimeUnit.SECONDS));
                return ms(t0);
            });
            Thread.sleep(200); // subscribed and waiting
            long t0 = System.nanoTime();
            n.release(2);
            rw.get(10, TimeUnit.SECONDS);
            System.out.printf("%s Redisson %s: an RSemaphore waiter woke %d ms after a native release%n", kind, RedissonClients.VERSION, ms(t0));
            assertTrue(ms(t0) < WAKE_MS);
            assertEquals(0, n.availablePermits());
            // A native waiter is served when Redisson releases.
            CompletableFuture<Boolean> nw = onThread(() -> n.tryAcquire(3, 30, TimeUnit.SECONDS));
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            r.release(2);
            assertFalse(nw.isDone(), "2 of 3");
            r.release();
            assertTrue(nw.get(5, TimeUnit.SECONDS));
            assertEquals(0, r.availablePermits());
            r.release(3);
            assertEquals(3, n.drainPermits());
            assertEquals(0, r.availablePermits());
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void rpermitExpirableSemaphore(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("rpes");
        try (Hashlock h = hashlock(s)) {
            RPermitExpirableSemaphore r = redisson.getPermitExpirableSemaphore(key);
            Semaphore n = h.semaphore(key);
            assertTrue(r.trySetPermits(2));
            String rid = r.tryAcquire(1, 30_000, TimeUnit.MILLISECONDS);
            assertNotNull(rid);
            Lease lease = n.tryLease(1).orElseThrow();
            assertEquals(0, r.availablePermits());
            assertNull(r.tryAcquire(), "nothing free for Redisson");
            assertTrue(n.tryLease(1).isEmpty(), "nothing free natively");
            // A Redisson waiter wakes when the native lease is closed.
            CompletableFuture<String> rw = onThread(() -> r.tryAcquire(30, 30, TimeUnit.SECONDS));
            Thread.sleep(200);
            long t0 = System.nanoTime();
            lease.close();
            String rid2 = rw.get(10, TimeUnit.SECONDS);
            System.out.printf("%s Redisson %s: an RPermitExpirableSemaphore waiter woke %d ms after a native lease's close%n",
                    kind, RedissonClients.VERSION, ms(t0));
            assertNotNull(rid2);
            assertTrue(ms(t0) < WAKE_MS);
            // A native waiter is served when Redisson releases its permit.
            CompletableFuture<Optional<Lease>> nw = onThread(() -> n.tryLease(1, 30, TimeUnit.SECONDS));
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            r.release(rid);
            Lease l2 = nw.get(5, TimeUnit.SECONDS).orElseThrow();
            // Redisson returns a native lease's id: the lease learns it lost the permit.
            r.release(l2.ids().get(0));
            LockLostException lost = l2.signal().future().get(2, TimeUnit.SECONDS);
            assertEquals(LossReason.NOT_HELD, lost.reason());
            assertThrows(LockLostException.class, l2::close);
            assertEquals(1, r.availablePermits());
            // A Redisson permit with a short lease: the server returns it at its deadline, to a queued native waiter.
            String shortId = r.tryAcquire(0, 400, TimeUnit.MILLISECONDS);
            assertNotNull(shortId);
            t0 = System.nanoTime();
            try (Lease l3 = n.tryLease(1, 10, TimeUnit.SECONDS).orElseThrow()) {
                long waited = ms(t0);
                assertTrue(waited >= 300 && waited < 2000, waited + " ms");
                assertEquals(1, l3.permits());
            }
            r.release(rid2);
            assertEquals(2, r.availablePermits());
            assertEquals(2, n.availablePermits());
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void rcountDownLatch(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("rlatch");
        try (Hashlock h = hashlock(s)) {
            RCountDownLatch r = redisson.getCountDownLatch(key);
            Latch n = h.latch(key);
            assertTrue(r.trySetCount(2));
            assertFalse(n.trySetCount(5));
            assertEquals(2, n.getCount());
            // A native waiter is answered when Redisson counts down to 0.
            CompletableFuture<Boolean> nw = onThread(() -> n.await(30, TimeUnit.SECONDS));
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            r.countDown();
            Thread.sleep(50);
            assertFalse(nw.isDone());
            r.countDown();
            assertTrue(nw.get(5, TimeUnit.SECONDS));
            // A Redisson waiter wakes on a native count-down.
            assertTrue(n.trySetCount(1));
            assertEquals(1, r.getCount());
            CompletableFuture<Boolean> rw = onThread(() -> r.await(30, TimeUnit.SECONDS));
            Thread.sleep(200);
            long t0 = System.nanoTime();
            assertEquals(0, n.countDown());
            assertTrue(rw.get(10, TimeUnit.SECONDS));
            System.out.printf("%s Redisson %s: an RCountDownLatch waiter woke %d ms after a native count-down%n", kind, RedissonClients.VERSION, ms(t0));
            assertTrue(ms(t0) < WAKE_MS);
            assertEquals(0, r.getCount());
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void rreadWriteLock(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String key = Matrix.key("rrw");
        try (Hashlock h = hashlock(s)) {
            RReadWriteLock r = redisson.getReadWriteLock(key);
            ReadWriteLock n = h.readWriteLock(key);
            // Redisson reads: native reads share it, a native writer waits and is served at Redisson's release.
            r.readLock().lock();
            assertTrue(onThread(() -> {
                boolean got = n.readLock().tryLock();
                if (got) n.readLock().unlock();
                return got;
            }).get(5, TimeUnit.SECONDS));
            CompletableFuture<Boolean> nw = onThread(() -> {
                boolean got = n.writeLock().tryLock(30, TimeUnit.SECONDS);
                if (got) n.writeLock().unlock();
                return got;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            r.readLock().unlock();
            assertTrue(nw.get(5, TimeUnit.SECONDS));
            // Native writes: Redisson readers and writers wait, and wake on the native release.
            CountDownLatch go = new CountDownLatch(1);
            CountDownLatch held = new CountDownLatch(1);
            CompletableFuture<Void> writer = onThread(() -> {
                n.writeLock().lock();
                held.countDown();
                go.await();
                n.writeLock().unlock();
                return null;
            });
            assertTrue(held.await(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> r.readLock().tryLock()).get(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> r.writeLock().tryLock()).get(5, TimeUnit.SECONDS));
            CompletableFuture<Long> rr = onThread(() -> {
                assertTrue(r.readLock().tryLock(30, TimeUnit.SECONDS));
                long t = System.nanoTime();
                r.readLock().unlock();
                return t;
            });
            Thread.sleep(200);
            long t0 = System.nanoTime();
            go.countDown();
            writer.get(5, TimeUnit.SECONDS);
            long woke = (rr.get(10, TimeUnit.SECONDS) - t0) / 1_000_000;
            System.out.printf("%s Redisson %s: an RReadWriteLock reader woke %d ms after a native write release%n", kind, RedissonClients.VERSION, woke);
            assertTrue(woke < WAKE_MS);
            // A native downgrade: Redisson readers wake when the write hold goes (read holds remain).
            CountDownLatch both = new CountDownLatch(1);
            CountDownLatch downgraded = new CountDownLatch(1);
            CountDownLatch done = new CountDownLatch(1);
            CompletableFuture<Void> dg = onThread(() -> {
                n.writeLock().lock();
                n.readLock().lock();
                both.countDown();
                downgraded.await();
                n.writeLock().unlock();
                done.await();
                n.readLock().unlock();
                return null;
            });
            assertTrue(both.await(5, TimeUnit.SECONDS));
            CompletableFuture<Long> rr2 = onThread(() -> {
                assertTrue(r.readLock().tryLock(30, TimeUnit.SECONDS));
                long t = System.nanoTime();
                r.readLock().unlock();
                return t;
            });
            Thread.sleep(200);
            assertFalse(rr2.isDone(), "write mode: the Redisson reader waits");
            t0 = System.nanoTime();
            downgraded.countDown();
            woke = (rr2.get(10, TimeUnit.SECONDS) - t0) / 1_000_000;
            System.out.printf("%s Redisson %s: an RReadWriteLock reader woke %d ms after a native downgrade%n", kind, RedissonClients.VERSION, woke);
            assertTrue(woke < WAKE_MS);
            done.countDown();
            dg.get(5, TimeUnit.SECONDS);
            // Redisson writes: a native reader waits in the queue and is served at Redisson's release.
            r.writeLock().lock();
            CompletableFuture<Boolean> nr = onThread(() -> {
                boolean got = n.readLock().tryLock(30, TimeUnit.SECONDS);
                if (got) n.readLock().unlock();
                return got;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            r.writeLock().unlock();
            assertTrue(nr.get(5, TimeUnit.SECONDS));
            assertTrue(waitFor(2000, () -> s.cmd("RWLOCK.INFO", key) == null));
            assertEquals(0L, s.cmd("EXISTS", key));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void redissonMultiLock(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        RedissonClient redisson = RedissonClients.shared(s);
        String tag = Matrix.key("rml");
        String a = "{" + tag + "}:a", b = "{" + tag + "}:b";
        try (Hashlock h = hashlock(s)) {
            MultiLock n = h.multiLock(a, b);
            RLock ra = redisson.getLock(a), rb = redisson.getLock(b);
            RedissonMultiLock r = new RedissonMultiLock(ra, rb);
            // Redisson holds both: the native multi-lock waits, served at Redisson's unlock.
            r.lock();
            assertFalse(onThread(n::tryLock).get(5, TimeUnit.SECONDS));
            assertTrue(s.cmd("LOCK.INFO", a) != null, "nothing partial: a still Redisson's only");
            CompletableFuture<Boolean> nw = onThread(() -> {
                boolean got = n.tryLock(30, TimeUnit.SECONDS);
                if (got) n.unlock();
                return got;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, a) == 1 && Race.waiters(s, b) == 1));
            r.unlock();
            assertTrue(nw.get(5, TimeUnit.SECONDS));
            // Redisson holds one key: the native multi-lock takes neither.
            rb.lock();
            assertFalse(onThread(n::tryLock).get(5, TimeUnit.SECONDS));
            assertNull(s.cmd("LOCK.INFO", a), "no partial hold");
            rb.unlock();
            // Native holds both: a RedissonMultiLock waits and wakes on the native release.
            CountDownLatch held = new CountDownLatch(1);
            CountDownLatch go = new CountDownLatch(1);
            CompletableFuture<Void> holder = onThread(() -> {
                n.lock();
                held.countDown();
                go.await();
                n.unlock();
                return null;
            });
            assertTrue(held.await(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> new RedissonMultiLock(redisson.getLock(a), redisson.getLock(b)).tryLock()).get(5, TimeUnit.SECONDS));
            assertFalse(onThread(() -> redisson.getLock(a).tryLock()).get(5, TimeUnit.SECONDS));
            CompletableFuture<Long> rw = onThread(() -> {
                RedissonMultiLock m = new RedissonMultiLock(redisson.getLock(a), redisson.getLock(b));
                assertTrue(m.tryLock(30, -1, TimeUnit.SECONDS));
                long t = System.nanoTime();
                m.unlock();
                return t;
            });
            Thread.sleep(200);
            long t0 = System.nanoTime();
            go.countDown();
            holder.get(5, TimeUnit.SECONDS);
            long woke = (rw.get(10, TimeUnit.SECONDS) - t0) / 1_000_000;
            System.out.printf("%s Redisson %s: a RedissonMultiLock waiter woke %d ms after a native multi-key release%n", kind, RedissonClients.VERSION, woke);
            assertTrue(woke < WAKE_MS);
            assertNull(s.cmd("LOCK.INFO", a));
            assertNull(s.cmd("LOCK.INFO", b));
        }
    }
}
