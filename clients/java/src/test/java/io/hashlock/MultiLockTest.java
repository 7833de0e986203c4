package io.hashlock;

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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The MultiLock against real servers, with each adapter (and a cluster for CROSSSLOT: see ClusterTest). */
class MultiLockTest {

    static LockInfo info(TestServer s, String key) {
        return LockTest.info(s, key);
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void allOrNothing(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String tag = Matrix.key("m");
        String a = "{" + tag + "}:a", b = "{" + tag + "}:b", c = "{" + tag + "}:c";
        try (Hashlock h = via.hashlock(s.port)) {
            Lock lb = h.lock(b);
            java.util.concurrent.CountDownLatch bHeld = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch bGo = new java.util.concurrent.CountDownLatch(1);
            CompletableFuture<Void> bHolder = onThread(() -> { // b held by another thread
                lb.lock();
                bHeld.countDown();
                bGo.await();
                lb.unlock();
                return null;
            });
            assertTrue(bHeld.await(5, TimeUnit.SECONDS));
            MultiLock ab = h.multiLock(a, b);
            assertFalse(ab.tryLock(), "b is taken: nothing is");
            assertNull(info(s, a), "no partial hold");
            assertFalse(ab.tryLock(50, TimeUnit.MILLISECONDS));
            assertNull(info(s, a));
            MultiLock ac = h.multiLock(a, c);
            assertTrue(ac.tryLock());
            assertTrue(ac.tryLock(), "re-entry");
            assertEquals(2, ac.holdCount());
            assertEquals(ac.owner(), info(s, a).owner(), "each key an ordinary lock");
            assertEquals(2, info(s, c).holds());
            assertTrue(info(s, a).keepalive(), "KEEPALIVE is the default");
            // A waiter for {a, b} queues on both and is served when both are free.
            CompletableFuture<Long> waiter = onThread(() -> {
                ab.lock();
                long t = System.nanoTime();
                ab.unlock();
                return t;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, a) == 1 && Race.waiters(s, b) == 1));
            ac.unlock();
            ac.unlock();
            assertFalse(ac.isHeldByCurrentThread());
            assertNull(info(s, c), "c is free");
            Thread.sleep(50);
            assertFalse(waiter.isDone(), "a is free, b is not");
            assertFalse(h.lock(a).tryLock(), "a newcomer does not pass the queued multi-key waiter");
            bGo.countDown();
            bHolder.get(5, TimeUnit.SECONDS);
            waiter.get(5, TimeUnit.SECONDS);
            assertTrue(waitFor(2000, () -> info(s, a) == null && info(s, b) == null));
            assertThrows(IllegalMonitorStateException.class, ab::unlock);
        }
    }

    /** {a, b} and {b, a} in many threads at once: never a deadlock, never two holders. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void oppositeOrdersDoNotDeadlock(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        String tag = Matrix.key("m");
        String a = "{" + tag + "}:a", b = "{" + tag + "}:b";
        try (Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            java.util.concurrent.atomic.AtomicInteger inside = new java.util.concurrent.atomic.AtomicInteger();
            java.util.concurrent.atomic.AtomicInteger max = new java.util.concurrent.atomic.AtomicInteger();
            List<CompletableFuture<Integer>> fs = new java.util.ArrayList<>();
            for (int t = 0; t < 6; t++) {
                MultiLock m = t % 2 == 0 ? h.multiLock(a, b) : h.multiLock(b, a);
                fs.add(onThread(() -> {
                    for (int i = 0; i < 20; i++) {
                        m.lock();
                        try {
                            max.accumulateAndGet(inside.incrementAndGet(), Math::max);
                            inside.decrementAndGet();
                        } finally {
                            m.unlock();
                        }
                    }
                    return 20;
                }));
            }
            int n = 0;
            for (CompletableFuture<Integer> f : fs) n += f.get(30, TimeUnit.SECONDS);
            assertEquals(120, n);
            assertEquals(1, max.get());
            assertNull(info(s, a));
            assertNull(info(s, b));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void aLostKeyIsSignalled(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean keepalive : new boolean[] {true, false}) {
            String tag = Matrix.key("m");
            String a = "{" + tag + "}:a", b = "{" + tag + "}:b";
            LockOptions o = LockOptions.builder().keepalive(keepalive).lease(Duration.ofMillis(600)).checkInterval(Duration.ofSeconds(30)).build();
            try (Hashlock h = Connectors.LETTUCE.hashlock(s.port, o)) {
                MultiLock ab = h.multiLock(a, b);
                ab.lock();
                Thread.sleep(1500); // 2.5 leases: the server (KEEPALIVE) or the watchdog keeps it
                assertEquals(ab.owner(), info(s, b).owner());
                assertFalse(ab.signal().isLost());
                long t0 = System.nanoTime();
                assertEquals(1L, s.cmd("LOCK.FORCERELEASE", b));
                LockLostException e = ab.signal().future().get(2, TimeUnit.SECONDS);
                System.out.printf("%s keepalive=%s: a multi-key hold learnt of a key's forced release after %d ms%n",
                        kind, keepalive, (System.nanoTime() - t0) / 1_000_000);
                assertEquals(LossReason.NOT_HELD, e.reason());
                assertThrows(LockLostException.class, ab::unlock);
                assertTrue(waitFor(2000, () -> info(s, a) == null), "what remained was given back");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anInterruptedWaitNeverKeepsAKey(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean keepalive : new boolean[] {true, false}) {
            try (Hashlock h = Connectors.JEDIS.hashlock(s.port, LockOptions.builder().keepalive(keepalive).build())) {
                String tag = Matrix.key("m");
                String a = "{" + tag + "}:a", b = "{" + tag + "}:b";
                Lock la = h.lock(a);
                la.lock();
                AtomicReference<Thread> t = new AtomicReference<>();
                CompletableFuture<Void> w = onThread(() -> {
                    t.set(Thread.currentThread());
                    h.multiLock(a, b).lockInterruptibly();
                    return null;
                });
                assertTrue(waitFor(5000, () -> Race.waiters(s, b) == 1));
                t.get().interrupt();
                ExecutionException e = assertThrows(ExecutionException.class, () -> w.get(5, TimeUnit.SECONDS));
                assertInstanceOf(InterruptedException.class, e.getCause());
                assertTrue(waitFor(2000, () -> Race.waiters(s, a) == 0 && Race.waiters(s, b) == 0));
                assertNull(info(s, b));
                la.unlock();
                Race.run("multilock " + kind + " keepalive=" + keepalive, 25, i -> new Race.Trial() {
                    final String tg = Matrix.key("mr");
                    final String ka = "{" + tg + "}:a", kb = "{" + tg + "}:b";
                    final MultiLock m = h.multiLock(ka, kb);
                    final AtomicReference<String> waiter = new AtomicReference<>();

                    public void hold() {
                        m.lock();
                    }

                    public void release() {
                        m.unlock();
                    }

                    public boolean await() throws InterruptedException {
                        waiter.set(m.owner());
                        if (!m.tryLock(30, TimeUnit.SECONDS)) return false;
                        m.unlock();
                        return true;
                    }

                    public String leftover() {
                        for (String k : List.of(ka, kb)) {
                            LockInfo li = info(s, k);
                            if (li != null && li.owner().equals(waiter.get())) return k;
                        }
                        return null;
                    }

                    public long queued() {
                        return Race.waiters(s, ka);
                    }

                    public String settled() {
                        return info(s, ka) == null && info(s, kb) == null ? null : info(s, ka) + " " + info(s, kb);
                    }
                });
            }
        }
    }
}
