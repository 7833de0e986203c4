package io.hashlock;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.Race;
import io.hashlock.testing.TestServer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The Latch against real servers, with each adapter. */
class LatchTest {

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void countsDownAndWakesEveryWaiter(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("latch");
        try (Hashlock h = via.hashlock(s.port)) {
            Latch latch = h.latch(key);
            assertEquals(0, latch.getCount());
            assertTrue(latch.await(0, TimeUnit.SECONDS), "a missing latch is open");
            assertTrue(latch.trySetCount(3));
            assertFalse(latch.trySetCount(7), "set already: nothing changes");
            assertEquals(3, latch.getCount());
            assertEquals("3", text(s.cmd("GET", key)), "Redisson's layout: the count at the key");
            assertFalse(latch.await(50, TimeUnit.MILLISECONDS), "the server's BLOCK ran out");
            List<CompletableFuture<Boolean>> waits = new ArrayList<>();
            for (int i = 0; i < 3; i++) waits.add(onThread(() -> latch.await(10, TimeUnit.SECONDS)));
            waits.add(onThread(() -> {
                latch.await();
                return true;
            }));
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 4));
            assertEquals(2, latch.countDown());
            assertEquals(1, latch.countDown());
            Thread.sleep(50);
            for (CompletableFuture<Boolean> w : waits) assertFalse(w.isDone(), "still closed");
            assertEquals(0, latch.countDown());
            for (CompletableFuture<Boolean> w : waits) assertTrue(w.get(5, TimeUnit.SECONDS));
            assertEquals(0, latch.getCount());
            assertEquals(0L, s.cmd("EXISTS", key), "an open latch is deleted");
            assertEquals(0, latch.countDown(), "a count-down of an open latch changes nothing");
        }
    }

    /** Whatever opens the latch answers its waiters: DEL, expiry. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anyOpeningAnswersWaiters(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        try (Hashlock h = Connectors.JEDIS.hashlock(s.port)) {
            String key = Matrix.key("latchdel");
            Latch latch = h.latch(key);
            latch.trySetCount(5);
            CompletableFuture<Boolean> w = onThread(() -> latch.await(10, TimeUnit.SECONDS));
            assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
            s.cmd("DEL", key);
            assertTrue(w.get(5, TimeUnit.SECONDS));
            String key2 = Matrix.key("latchexp");
            Latch l2 = h.latch(key2);
            l2.trySetCount(5);
            s.cmd("PEXPIRE", key2, "300");
            long t0 = System.nanoTime();
            assertTrue(l2.await(10, TimeUnit.SECONDS));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 200 && ms < 2000, ms + " ms");
        }
    }

    /** An interrupted await leaves the queue at once (its connection closed), and throws InterruptedException. */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void anInterruptedAwaitLeavesTheQueue(TestServer.Kind kind, Connectors via) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("latchint");
        try (Hashlock h = via.hashlock(s.port)) {
            Latch latch = h.latch(key);
            latch.trySetCount(1);
            for (boolean timed : new boolean[] {false, true}) {
                AtomicReference<Thread> t = new AtomicReference<>();
                CompletableFuture<Boolean> w = onThread(() -> {
                    t.set(Thread.currentThread());
                    if (timed) return latch.await(30, TimeUnit.SECONDS);
                    latch.await();
                    return true;
                });
                assertTrue(waitFor(5000, () -> Race.waiters(s, key) == 1));
                t.get().interrupt();
                ExecutionException e = assertThrows(ExecutionException.class, () -> w.get(5, TimeUnit.SECONDS));
                assertInstanceOf(InterruptedException.class, e.getCause());
                assertTrue(waitFor(2000, () -> Race.waiters(s, key) == 0));
            }
            assertEquals(1, latch.getCount());
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void errorsAreTyped(TestServer.Kind kind) throws Exception {
        TestServer s = TestServer.shared(kind);
        String key = Matrix.key("notlatch");
        try (Hashlock h = Connectors.LETTUCE.hashlock(s.port)) {
            s.cmd("SET", key, "hello");
            Latch latch = h.latch(key);
            NotLatchException e = assertThrows(NotLatchException.class, latch::countDown);
            assertEquals("NOTLATCH", e.code());
            assertThrows(NotLatchException.class, latch::getCount);
            assertEquals("hello", text(s.cmd("GET", key)), "nothing changed");
            s.cmd("LPUSH", key + "l", "x");
            assertThrows(WrongTypeException.class, h.latch(key + "l")::countDown);
            assertThrows(IllegalArgumentException.class, () -> latch.trySetCount(0));
        }
    }
}
