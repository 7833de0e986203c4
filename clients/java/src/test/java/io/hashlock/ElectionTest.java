package io.hashlock;

import static io.hashlock.LockTest.info;
import static io.hashlock.LockTest.onThread;
import static io.hashlock.LockTest.waiters;
import static io.hashlock.testing.TestServer.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Leader election against real servers (lifecycle events on), with each
 * adapter: campaign, resign, leader, observe in order, revocation as it
 * happens; the error when the server does not send the events; a duplicate
 * candidate id; an interrupted campaign. And the lock's loss signal driven
 * by the events (check interval one hour).
 */
class ElectionTest {
    /** Collects an observation's events. */
    static final class Events implements AutoCloseable {
        final LinkedBlockingQueue<ElectionEvent> queue = new LinkedBlockingQueue<>();
        final Observation observation;

        Events(Election e) {
            observation = e.observe(queue::add);
        }

        ElectionEvent next() throws InterruptedException {
            ElectionEvent ev = queue.poll(10, TimeUnit.SECONDS);
            if (ev == null) throw new AssertionError("no event within 10 s");
            return ev;
        }

        ElectionEvent expect(ElectionEvent.Kind kind, String id) throws InterruptedException {
            ElectionEvent ev = next();
            assertEquals(kind, ev.kind(), ev.toString());
            if (id != null) assertEquals(id, ev.leader().id(), ev.toString());
            return ev;
        }

        void quiet(long ms) throws InterruptedException {
            ElectionEvent ev = queue.poll(ms, TimeUnit.MILLISECONDS);
            assertNull(ev, "unexpected event");
        }

        @Override
        public void close() {
            observation.close();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void campaignResignLeaderObserve(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("election");
        try (Hashlock ha = via.hashlock(s.port); Hashlock hb = via.hashlock(s.port); Hashlock ho = via.hashlock(s.port)) {
            Election a = ha.election(key, ElectionOptions.builder().id("node-a").build());
            Election b = hb.election(key, ElectionOptions.builder().id("node-b").build());
            Election watcher = ho.election(key);
            assertEquals(Optional.empty(), a.leader());
            try (Events o = new Events(watcher); Events oa = new Events(a)) {
                o.expect(ElectionEvent.Kind.NO_LEADER, null);
                oa.expect(ElectionEvent.Kind.NO_LEADER, null);

                Leadership la = a.campaign();
                assertTrue(la.isActive());
                long t1 = o.expect(ElectionEvent.Kind.NEW_LEADER, "node-a").leader().term();
                assertEquals(la.term(), t1);
                oa.expect(ElectionEvent.Kind.ELECTED, "node-a");
                assertEquals(Optional.of(new Leader("node-a", t1)), b.leader());
                assertSame(la, a.campaign(), "campaigning while leading returns the term in force");
                assertSame(la, a.leadership().orElseThrow());

                // b queues; a resigns (from another thread: the id is the owner); b leads at once.
                CompletableFuture<Leadership> fb = onThread(b::campaign);
                assertTrue(waitFor(5000, () -> waiters(s, key) == 1), "b queued");
                assertFalse(fb.isDone(), "b elected while a leads");
                onThread(() -> {
                    a.resign();
                    return null;
                }).get(5, TimeUnit.SECONDS);
                Leadership lb = fb.get(5, TimeUnit.SECONDS);
                assertTrue(lb.term() > t1, lb.term() + " after " + t1);
                assertFalse(la.isActive());
                assertFalse(la.signal().isLost(), "a resignation is no revocation");
                assertEquals(Optional.empty(), a.leadership());
                assertEquals(lb.term(), o.expect(ElectionEvent.Kind.NEW_LEADER, "node-b").leader().term());
                oa.expect(ElectionEvent.Kind.REVOKED, "node-a");
                oa.expect(ElectionEvent.Kind.NEW_LEADER, "node-b");

                // Forced off: b is told as it happens.
                long t0 = System.nanoTime();
                s.cmd("LOCK.FORCERELEASE", key);
                LockLostException lost = lb.signal().future().get(2, TimeUnit.SECONDS);
                System.out.printf("%s %s: revocation seen after %.2f ms: %s%n", kind, via, (System.nanoTime() - t0) / 1e6, lost.getMessage());
                assertFalse(lb.isActive());
                o.expect(ElectionEvent.Kind.NO_LEADER, null);
                oa.expect(ElectionEvent.Kind.NO_LEADER, null);
                o.quiet(100);
                b.resign(); // not leading: nothing to do
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void withoutEventsSaysWhatToSet(TestServer.Kind kind) throws Exception {
        try (TestServer s = TestServer.start(kind); Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            Election e = h.election(Matrix.key("off"));
            for (Runnable call : new Runnable[] {() -> {
                try {
                    e.campaign();
                } catch (InterruptedException x) {
                    throw new AssertionError(x);
                }
            }, () -> e.observe(ev -> {})}) {
                long t0 = System.nanoTime();
                EventsOffException x = assertThrows(EventsOffException.class, call::run);
                assertTrue(x.getMessage().contains("CONFIG SET notify-keyspace-events Kd"), x.getMessage());
                assertTrue(System.nanoTime() - t0 < 1_000_000_000L, "at once");
                System.out.println(kind + ": " + x.getMessage());
            }
            // With some classes on, the advice keeps them.
            s.cmd("CONFIG", "SET", "notify-keyspace-events", "Kx");
            EventsOffException x = assertThrows(EventsOffException.class, () -> e.observe(ev -> {}));
            assertEquals("xKd", x.wanted());
            s.cmd("CONFIG", "SET", "notify-keyspace-events", "xKd");
            e.observe(ev -> {}).close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void duplicateCandidateId(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("twin");
        try (Hashlock h1 = Connectors.JEDIS.hashlock(s.port); Hashlock h2 = Connectors.JEDIS.hashlock(s.port)) {
            ElectionOptions twin = ElectionOptions.builder().id("twin").build();
            Leadership l1 = h1.election(key, twin).campaign();
            assertThrows(DuplicateCandidateException.class, () -> h2.election(key, twin).campaign());
            LockInfo i = info(s, key);
            assertEquals("twin", i.owner());
            assertEquals(1, i.holds());
            assertTrue(l1.isActive());
            l1.resign();
            assertNull(info(s, key));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void interruptedCampaignLeavesNothing(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("interrupted");
        try (Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            Leadership leader = h.election(key).campaign();
            Election other = h.election(key);
            assertEquals(Optional.empty(), other.campaign(100, TimeUnit.MILLISECONDS));
            Thread[] t = new Thread[1];
            CompletableFuture<Object> f = onThread(() -> {
                t[0] = Thread.currentThread();
                return other.campaign();
            });
            assertTrue(waitFor(5000, () -> waiters(s, key) == 1));
            t[0].interrupt();
            Throwable x = assertThrows(java.util.concurrent.ExecutionException.class, () -> f.get(5, TimeUnit.SECONDS)).getCause();
            assertTrue(x instanceof InterruptedException, x.toString());
            leader.resign();
            assertTrue(waitFor(2000, () -> info(s, key) == null), "the interrupted candidate was not elected");
        }
    }

    /** With events, a held lock learns of a loss its connection does not show as it happens (checks every hour here). */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void lossSignalFromEvents(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean ka : new boolean[] {true, false}) {
            for (String how : new String[] {"forced", "expired", "taken"}) {
                String key = Matrix.key(how);
                LockOptions slow = LockOptions.builder().keepalive(ka).checkInterval(Duration.ofHours(1)).build();
                try (Hashlock h = Hashlock.builder(via.standalone(s.port)).lockOptions(slow).build()) {
                    Lock lock = h.lock(key);
                    lock.lock();
                    LossSignal signal = lock.signal();
                    Thread.sleep(50); // the subscription is made beside the acquisition
                    long t0 = System.nanoTime();
                    switch (how) {
                        case "forced" -> s.cmd("LOCK.FORCERELEASE", key);
                        case "expired" -> s.cmd("LOCK.RENEW", key, lock.owner(), "PX", "1"); // untied, 1 ms left
                        default -> {
                            s.cmd("LOCK.FORCERELEASE", key);
                            s.cmd("LOCK.ACQUIRE", key, "someone-else", "PX", "30000");
                        }
                    }
                    LockLostException e = signal.future().get(1, TimeUnit.SECONDS);
                    System.out.printf("%s %s keepalive=%s %s: told after %.2f ms%n", kind, via, ka, how, (System.nanoTime() - t0) / 1e6);
                    assertEquals(LossReason.NOT_HELD, e.reason(), e.getMessage());
                    assertThrows(LockLostException.class, lock::unlock);
                }
            }
        }
    }
}
