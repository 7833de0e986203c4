package io.hashlock;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.Race;
import io.hashlock.testing.TestServer;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The Semaphore and its leases against real servers, with each adapter. */
class SemaphoreTest {
    static final LockOptions FAST = LockOptions.builder().checkInterval(Duration.ofMillis(50)).build();

    static SemaphoreInfo info(TestServer s, String key) {
        return SemaphoreInfo.parse(s.cmd("SEMAPHORE.INFO", key));
    }

    static long available(TestServer s, String key) {
        SemaphoreInfo i = info(s, key);
        return i == null ? 0 : i.available();
    }

    static void killClient(TestServer s, String name) {
        for (String line : text(s.cmd("CLIENT", "LIST")).split("\n")) {
            if (line.contains(" name=" + name + " ")) s.cmd("CLIENT", "KILL", "ID", line.split(" ")[0].substring(3));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void anonymousPermitsQueueFirstComeFirstServed(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("sem");
        try (Hashlock h = via.hashlock(s.port)) {
            Semaphore sem = h.semaphore(key);
            assertEquals(0, sem.availablePermits());
            assertFalse(sem.tryAcquire(), "a missing semaphore has no permits");
            assertTrue(sem.trySetPermits(4));
            assertFalse(sem.trySetPermits(100), "set already: nothing changes");
            assertEquals(4, sem.availablePermits());
            assertEquals(4, Long.parseLong(text(s.cmd("GET", key))), "Redisson's layout: the count at the key");
            assertTrue(sem.tryAcquire(3));
            assertFalse(sem.tryAcquire(2));
            assertFalse(sem.tryAcquire(2, 50, TimeUnit.MILLISECONDS), "the server's BLOCK ran out");
            // A head asking for 3 is not overtaken by a later waiter asking for 1.
            CompletableFuture<Long> three = onThread(() -> {
                sem.acquire(3);
                return System.nanoTime();
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            CompletableFuture<Long> one = onThread(() -> {
                assertTrue(sem.tryAcquire(1, 10, TimeUnit.SECONDS));
                return System.nanoTime();
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 2));
            assertFalse(sem.tryAcquire(), "nobody jumps the queue, though a permit is free");
            assertEquals(1, sem.availablePermits());
            assertEquals(2, sem.release(1), "2 free: the head wants 3");
            assertFalse(three.isDone());
            assertFalse(one.isDone());
            assertEquals(0, sem.release(1), "the head took 3; the next waits");
            long t3 = three.get(5, TimeUnit.SECONDS);
            Thread.sleep(50);
            assertFalse(one.isDone());
            assertEquals(0, sem.release(1));
            assertTrue(one.get(5, TimeUnit.SECONDS) > t3);
            assertEquals(5, sem.addPermits(5));
            assertEquals(3, sem.addPermits(-2));
            assertEquals(3, sem.drainPermits());
            assertEquals(0, sem.availablePermits());
            assertEquals(0, Race.waiters(s, key));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void leasesAreTiedReturnedAndWaitedFor(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("lease");
        try (Hashlock h = via.hashlock(s.port)) {
            Semaphore sem = h.semaphore(key);
            sem.trySetPermits(3);
            Lease two;
            try (Lease lease = sem.lease(2)) {
                two = lease;
                assertEquals(2, lease.permits());
                for (String id : lease.ids()) assertTrue(id.matches("[0-9a-f]{32}"), id);
                assertEquals(2, new HashSet<>(lease.ids()).size());
                SemaphoreInfo i = info(s, key);
                assertEquals(1, i.available());
                assertEquals(2, i.leased());
                assertEquals(2, i.keepalive(), "KEEPALIVE is the default");
                assertEquals(2L, s.cmd("ZCARD", "{" + key + "}:timeout"), "Redisson's layout: the ids in {key}:timeout");
                assertTrue(lease.isActive());
                // A third permit is free; a lease of two waits for this one.
                Optional<Lease> none = sem.tryLease(2);
                assertTrue(none.isEmpty());
                CompletableFuture<List<String>> waiter = onThread(() -> {
                    try (Lease l = sem.tryLease(2, 10, TimeUnit.SECONDS).orElseThrow()) {
                        return l.ids();
                    }
                });
                assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
                lease.renew();
                assertTrue(lease.isActive());
                lease.close(); // inside the block: the close at its end is a no-op
                assertFalse(lease.isActive());
                List<String> got = waiter.get(5, TimeUnit.SECONDS);
                assertEquals(2, got.size());
                assertNotEquals(lease.ids(), got);
            }
            assertFalse(two.signal().isLost(), "returned by close(), not lost");
            assertEquals(3, info(s, key).available());
            assertEquals(0, info(s, key).leased());
            // Watchdog mode: a plain lease, renewed by the client.
            Semaphore watched = h.semaphore(key, LockOptions.builder().keepalive(false).lease(Duration.ofMillis(600)).build());
            try (Lease lease = watched.lease(1)) {
                assertEquals(0, info(s, key).keepalive());
                Thread.sleep(1500); // 2.5 leases: only the watchdog keeps it
                assertEquals(1, info(s, key).leased());
                assertFalse(lease.signal().isLost());
            }
            assertEquals(3, info(s, key).available());
        }
    }

    /** A lease's loss signal: its connection killed (the server returns the permits), its ids returned by someone else. */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void aLeaseSignalsItsLoss(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("leaseloss");
        String name = "lease-" + key.substring(10);
        try (Hashlock h = Hashlock.builder(LossSignalTest.named(via, s.port, name)).lockOptions(FAST).build()) {
            Semaphore sem = h.semaphore(key);
            sem.trySetPermits(2);
            Lease lease = sem.lease(2);
            killClient(s, name);
            LockLostException e = lease.signal().future().get(2, TimeUnit.SECONDS);
            assertEquals(LossReason.CONNECTION_LOST, e.reason());
            assertTrue(waitFor(2000, () -> info(s, key).available() == 2), "the server returned the tied permits");
            assertEquals(e, assertThrows(LockLostException.class, lease::close));
            lease.close(); // ended: a no-op
            // Someone else returns the ids (as a Redisson client's release(id) would): lost, seen by the events.
            for (boolean keepalive : new boolean[] {true, false}) {
                Semaphore sem2 = h.semaphore(key, LockOptions.builder().keepalive(keepalive).checkInterval(Duration.ofSeconds(30)).build());
                Lease l2 = sem2.lease(1);
                long t0 = System.nanoTime();
                assertEquals(1L, s.cmd("SEMAPHORE.RETURN", key, l2.ids().get(0)));
                LockLostException e2 = l2.signal().future().get(2, TimeUnit.SECONDS);
                System.out.printf("%s keepalive=%s: a lease learnt of its returned id after %d ms (checks every 30 s: the events)%n",
                        kind, keepalive, (System.nanoTime() - t0) / 1_000_000);
                assertEquals(LossReason.NOT_HELD, e2.reason());
                assertThrows(LockLostException.class, l2::close);
                assertEquals(2, info(s, key).available(), "nothing returned twice");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anInterruptedAcquireNeverKeepsPermits(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        try (Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            // Queued, then interrupted: it leaves the queue and the count is untouched.
            String key = Matrix.key("semint");
            Semaphore sem = h.semaphore(key);
            AtomicReference<Thread> t = new AtomicReference<>();
            CompletableFuture<Void> wait = onThread(() -> {
                t.set(Thread.currentThread());
                sem.acquire(2);
                return null;
            });
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            t.get().interrupt();
            ExecutionException e = assertThrows(ExecutionException.class, () -> wait.get(5, TimeUnit.SECONDS));
            assertInstanceOf(InterruptedException.class, e.getCause());
            assertEquals(0, Race.waiters(s, key));
            assertEquals(2, sem.release(2), "the interrupted waiter was not served");
            // Released and interrupted at once, many times: the permit is never lost.
            Race.run("semaphore acquire " + kind, 30, i -> new Race.Trial() {
                final String k = Matrix.key("semrace");
                final Semaphore sm = h.semaphore(k);
                final java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);

                public void hold() {
                    sm.trySetPermits(1);
                    assertTrue(sm.tryAcquire());
                }

                public void release() {
                    sm.release();
                    released.countDown();
                }

                public boolean await() throws InterruptedException {
                    if (!sm.tryAcquire(1, 30, TimeUnit.SECONDS)) return false;
                    sm.release();
                    return true;
                }

                // Anonymous permits have no owner: once the holder's release
                // has landed, a permit the interrupted waiter kept shows as a
                // count of 0 (the waiter's answer was read and undone before
                // the InterruptedException, so nothing changes after it).
                public String leftover() throws InterruptedException {
                    assertTrue(released.await(5, TimeUnit.SECONDS));
                    long a = available(s, k);
                    return a == 1 ? null : "the count is " + a + ", not 1";
                }

                public long queued() {
                    return Race.waiters(s, k);
                }

                public String settled() {
                    return available(s, k) == 1 ? null : "count " + available(s, k);
                }
            });
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anInterruptedLeaseNeverKeepsPermits(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        for (boolean keepalive : new boolean[] {true, false}) {
            try (Hashlock h = Hashlock.builder(Connectors.JEDIS.standalone(s.port)).lockOptions(LockOptions.builder().keepalive(keepalive).build()).build()) {
                Race.run("semaphore lease " + kind + " keepalive=" + keepalive, 30, i -> new Race.Trial() {
                    final String k = Matrix.key("leaserace");
                    final Semaphore sm = h.semaphore(k);
                    Lease held;

                    public void hold() throws InterruptedException {
                        sm.trySetPermits(1);
                        held = sm.lease(1);
                    }

                    public void release() {
                        held.close();
                    }

                    public boolean await() throws InterruptedException {
                        Optional<Lease> l = sm.tryLease(1, 30, TimeUnit.SECONDS);
                        l.ifPresent(Lease::close);
                        return l.isPresent();
                    }

                    // Leased permits have ids: any id leased but the holder's is the waiter's
                    // (the holder's own return may not have landed yet).
                    public String leftover() {
                        List<String> leased = new java.util.ArrayList<>();
                        for (Object id : (List<?>) s.cmd("ZRANGE", "{" + k + "}:timeout", "0", "-1")) leased.add(java.util.HexFormat.of().formatHex((byte[]) id));
                        leased.removeAll(held.ids());
                        return leased.isEmpty() ? null : "permits " + leased + " (holder's: " + held.ids() + ")";
                    }

                    public long queued() {
                        return Race.waiters(s, k);
                    }

                    public String settled() {
                        SemaphoreInfo si = info(s, k);
                        return si.available() == 1 && si.leased() == 0 ? null : si.toString();
                    }
                });
            }
        }
    }

    /**
     * A wait whose BLOCK runs out in the instant of a release: the server
     * decides (granted, or nil and the permit stays free); either way no
     * permit is lost or kept by a waiter that was told no.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void aTimeoutRacingAReleaseConservesPermits(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        try (Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            int granted = 0, timedOut = 0;
            for (int i = 0; i < 40; i++) {
                String k = Matrix.key("semtimeout");
                Semaphore sem = h.semaphore(k);
                sem.trySetPermits(1);
                assertTrue(sem.tryAcquire());
                boolean lease = i % 2 == 1;
                CompletableFuture<Boolean> w = onThread(() -> {
                    if (!lease) return sem.tryAcquire(1, 30, TimeUnit.MILLISECONDS);
                    Optional<Lease> l = sem.tryLease(1, 30, TimeUnit.MILLISECONDS);
                    l.ifPresent(Lease::close);
                    return l.isPresent();
                });
                assertTrue(waitFor(5000, () -> Race.waiters(s, k) == 1 || w.isDone()));
                Thread.sleep(25 + i % 10); // around the BLOCK's end
                sem.release();
                if (w.get(5, TimeUnit.SECONDS)) {
                    granted++;
                    if (!lease) sem.release();
                } else {
                    timedOut++;
                }
                assertTrue(waitFor(2000, () -> info(s, k).available() == 1 && info(s, k).leased() == 0), "trial " + i + ": " + info(s, k));
            }
            System.out.printf("%s: BLOCK ran out around a release 40 times: %d granted, %d timed out, no permit lost%n", kind, granted, timedOut);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void errorsAreTyped(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("notsem");
        try (Hashlock h = Connectors.LETTUCE.hashlock(s.port)) {
            s.cmd("SET", key, "hello");
            Semaphore sem = h.semaphore(key);
            NotSemaphoreException e = assertThrows(NotSemaphoreException.class, sem::tryAcquire);
            assertEquals("NOTSEMAPHORE", e.code());
            assertThrows(NotSemaphoreException.class, () -> sem.tryLease(1));
            assertThrows(NotSemaphoreException.class, sem::release);
            assertThrows(NotSemaphoreException.class, () -> sem.acquire(1));
            assertEquals("hello", text(s.cmd("GET", key)), "nothing changed");
            s.cmd("HSET", key + "h", "a", "1");
            assertThrows(WrongTypeException.class, h.semaphore(key + "h")::availablePermits);
            assertThrows(IllegalArgumentException.class, () -> sem.tryAcquire(0));
        }
    }
}
