package io.hashlock;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.Race;
import io.hashlock.testing.TestServer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The ReadWriteLock against real servers, with each adapter. */
class ReadWriteLockTest {

    static RwLockInfo info(TestServer s, String key) {
        return RwLockInfo.parse(s.cmd("RWLOCK.INFO", key));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void readersShareWritersExclude(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("rw");
        try (Hashlock h = via.hashlock(s.port)) {
            ReadWriteLock rw = h.readWriteLock(key);
            rw.readLock().lock();
            rw.readLock().lock(); // re-entry
            assertEquals(2, rw.readLock().holdCount());
            assertTrue(onThread(() -> {
                boolean got = rw.readLock().tryLock();
                if (got) rw.readLock().unlock();
                return got;
            }).get(5, TimeUnit.SECONDS), "another reader shares it");
            assertFalse(onThread(() -> rw.writeLock().tryLock(50, TimeUnit.MILLISECONDS)).get(5, TimeUnit.SECONDS), "a writer waits for readers");
            RwLockInfo i = info(s, key);
            assertEquals("read", i.mode());
            assertEquals(2, i.readHolds());
            assertEquals(1, i.keepalive(), "KEEPALIVE is the default");
            assertEquals("read", text(s.cmd("HGET", key, "mode")), "Redisson's layout");
            assertEquals("2", text(s.cmd("HGET", key, rw.owner())));
            // No upgrade: refused at once, the read holds stay.
            NoUpgradeException e = assertThrows(NoUpgradeException.class, () -> rw.writeLock().tryLock());
            assertEquals("NOUPGRADE", e.code());
            assertThrows(NoUpgradeException.class, () -> rw.writeLock().lock());
            assertEquals(2, rw.readLock().holdCount());
            assertEquals(2, info(s, key).readHolds());
            // A queued writer: readers that come later do not pass it.
            CountDownLatch writerIn = new CountDownLatch(1);
            CountDownLatch writerGo = new CountDownLatch(1);
            CompletableFuture<Long> writer = onThread(() -> {
                rw.writeLock().lock();
                long t = System.nanoTime();
                writerIn.countDown();
                writerGo.await();
                rw.writeLock().unlock();
                return t;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            CompletableFuture<Long> reader = onThread(() -> {
                assertFalse(rw.readLock().tryLock(), "a reader does not pass a queued writer");
                rw.readLock().lock();
                long t = System.nanoTime();
                rw.readLock().unlock();
                return t;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 2));
            rw.readLock().unlock();
            assertFalse(writer.isDone());
            rw.readLock().unlock();
            assertFalse(rw.readLock().isHeldByCurrentThread());
            assertTrue(writerIn.await(5, TimeUnit.SECONDS));
            assertEquals("write", info(s, key).mode());
            assertFalse(reader.isDone());
            writerGo.countDown();
            assertTrue(reader.get(5, TimeUnit.SECONDS) > writer.get(5, TimeUnit.SECONDS));
            assertTrue(waitFor(2000, () -> info(s, key) == null));
            assertThrows(IllegalMonitorStateException.class, () -> rw.readLock().unlock());
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void aWriterDowngrades(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("rwdown");
        try (Hashlock h = via.hashlock(s.port, LockOptions.builder().token(true).build())) {
            ReadWriteLock rw = h.readWriteLock(key);
            rw.writeLock().lock();
            long t1 = rw.writeLock().token();
            assertTrue(rw.writeLock().tryLock(), "re-entry");
            assertTrue(rw.writeLock().token() > t1, "every write acquisition takes a token");
            rw.writeLock().unlock();
            assertFalse(onThread(() -> rw.readLock().tryLock()).get(5, TimeUnit.SECONDS), "a writer excludes readers");
            rw.readLock().lock(); // downgrade
            assertEquals("1", text(s.cmd("HGET", key, rw.owner() + ":write")), "Redisson's layout: the writer's field");
            rw.writeLock().unlock();
            assertFalse(rw.writeLock().isHeldByCurrentThread());
            assertTrue(rw.readLock().isHeldByCurrentThread());
            assertEquals("read", info(s, key).mode());
            assertTrue(onThread(() -> {
                boolean got = rw.readLock().tryLock();
                if (got) rw.readLock().unlock();
                return got;
            }).get(5, TimeUnit.SECONDS), "after the downgrade others read too");
            rw.readLock().unlock();
            assertNull(info(s, key));
        }
    }

    /** Forced release: the holder's signal fires from the lifecycle events; the watchdog mode keeps a hold past its lease. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void lossIsSignalledAndTheWatchdogRenews(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean keepalive : new boolean[] {true, false}) {
            String key = Matrix.key("rwloss");
            LockOptions o = LockOptions.builder().keepalive(keepalive).lease(Duration.ofMillis(600)).checkInterval(Duration.ofSeconds(30)).build();
            try (Hashlock h = Connectors.JEDIS.hashlock(s.port, o)) {
                ReadWriteLock rw = h.readWriteLock(key);
                rw.writeLock().lock();
                rw.readLock().lock();
                Thread.sleep(1500); // 2.5 leases: the server (KEEPALIVE) or the watchdog keeps it
                assertEquals(keepalive ? 1 : 0, info(s, key).keepalive());
                assertFalse(rw.writeLock().signal().isLost());
                long t0 = System.nanoTime();
                assertTrue(rw.forceUnlock());
                LockLostException e = rw.readLock().signal().future().get(2, TimeUnit.SECONDS);
                System.out.printf("%s keepalive=%s: a read-write hold learnt of its forced release after %d ms (checks every 30 s: the events)%n",
                        kind, keepalive, (System.nanoTime() - t0) / 1_000_000);
                assertEquals(LossReason.NOT_HELD, e.reason());
                assertThrows(LockLostException.class, () -> rw.readLock().unlock());
                assertFalse(rw.writeLock().isHeldByCurrentThread());
                assertTrue(rw.writeLock().tryLock(), "taken afresh");
                rw.writeLock().unlock();
                assertNull(info(s, key));
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anInterruptedWaitNeverKeepsAHold(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean keepalive : new boolean[] {true, false}) {
            try (Hashlock h = Connectors.JEDIS.hashlock(s.port, LockOptions.builder().keepalive(keepalive).build())) {
                // Queued, interrupted: out of the queue, nothing held.
                String key = Matrix.key("rwint");
                ReadWriteLock rw = h.readWriteLock(key);
                rw.readLock().lock();
                AtomicReference<Thread> t = new AtomicReference<>();
                CompletableFuture<Void> w = onThread(() -> {
                    t.set(Thread.currentThread());
                    rw.writeLock().lockInterruptibly();
                    return null;
                });
                assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
                t.get().interrupt();
                ExecutionException e = assertThrows(ExecutionException.class, () -> w.get(5, TimeUnit.SECONDS));
                assertInstanceOf(InterruptedException.class, e.getCause());
                assertTrue(waitFor(2000, () -> Race.waiters(s, key) == 0));
                rw.readLock().unlock();
                assertNull(info(s, key));
                for (ReadWriteLock.Mode held : ReadWriteLock.Mode.values()) {
                    Race.run("rwlock write after " + held + " " + kind + " keepalive=" + keepalive, 25, i -> new Race.Trial() {
                        final String k = Matrix.key("rwrace");
                        final ReadWriteLock l = h.readWriteLock(k);
                        final AtomicReference<String> waiter = new AtomicReference<>();

                        java.util.concurrent.locks.Lock holderLock() {
                            return held == ReadWriteLock.Mode.READ ? l.readLock() : l.writeLock();
                        }

                        public void hold() {
                            holderLock().lock();
                        }

                        public void release() {
                            holderLock().unlock();
                        }

                        public boolean await() throws InterruptedException {
                            waiter.set(l.owner());
                            if (!l.writeLock().tryLock(30, TimeUnit.SECONDS)) return false;
                            l.writeLock().unlock();
                            return true;
                        }

                        public String leftover() {
                            Object w = s.cmd("HGET", k, waiter.get() + ":write");
                            Object r = s.cmd("HGET", k, waiter.get());
                            return w == null && r == null ? null : "write " + text(w) + " read " + text(r);
                        }

                        public long queued() {
                            return Race.waiters(s, k);
                        }

                        public String settled() {
                            RwLockInfo ri = info(s, k);
                            return ri == null ? null : ri.toString();
                        }
                    });
                }
            }
        }
    }
}
