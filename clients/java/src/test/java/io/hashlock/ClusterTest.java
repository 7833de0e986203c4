package io.hashlock;

import static io.hashlock.testing.TestServer.text;
import static io.hashlock.testing.TestServer.waitFor;
import static io.hashlock.testing.Threads.onThread;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.jedis.JedisConnector;
import io.hashlock.lettuce.LettuceConnector;
import io.hashlock.testing.Connectors;
import io.hashlock.testing.Matrix;
import io.hashlock.testing.TestServer;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;

/**
 * Cluster clients (JedisCluster, Lettuce's RedisClusterClient) route each
 * lock to its key's node; MOVED and ASK are followed; a wait whose slot
 * moves is re-issued on the new node; a KEEPALIVE hold whose slot moves is
 * tied again on the new node.
 */
class ClusterTest {
    static final String[] CLUSTER = {"cluster-enabled", "yes", "cluster-config-file", "nodes.conf", "cluster-require-full-coverage", "no"};

    static boolean ok(TestServer s) {
        return text(s.cmd("CLUSTER", "INFO")).contains("cluster_state:ok");
    }

    /** Two primaries: src starts with every slot; a test moves its key's slot to dst. */
    static final class TwoNodes implements AutoCloseable {
        final TestServer src;
        final TestServer dst;
        final String srcId;
        final String dstId;

        TwoNodes(TestServer.Kind kind) {
            src = TestServer.start(kind, CLUSTER);
            dst = TestServer.start(kind, CLUSTER);
            src.cmd("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
            src.cmd("CLUSTER", "MEET", "127.0.0.1", Integer.toString(dst.port));
            assertTrue(waitFor(20_000, () -> ok(src) && ok(dst) && text(dst.cmd("CLUSTER", "NODES")).strip().split("\n").length == 2));
            srcId = text(src.cmd("CLUSTER", "MYID"));
            dstId = text(dst.cmd("CLUSTER", "MYID"));
        }

        String slot(String key) {
            return Long.toString((Long) src.cmd("CLUSTER", "KEYSLOT", key));
        }

        void startMigration(String key) {
            dst.cmd("CLUSTER", "SETSLOT", slot(key), "IMPORTING", srcId);
            src.cmd("CLUSTER", "SETSLOT", slot(key), "MIGRATING", dstId);
        }

        void migrate(String key) {
            src.cmd("MIGRATE", "127.0.0.1", Integer.toString(dst.port), key, "0", "5000");
        }

        void finishMigration(String key) {
            dst.cmd("CLUSTER", "SETSLOT", slot(key), "NODE", dstId);
            src.cmd("CLUSTER", "SETSLOT", slot(key), "NODE", dstId);
        }

        @Override
        public void close() {
            src.close();
            dst.close();
        }
    }

    static LockInfo info(TestServer s, String key) {
        return Lock.parseInfo(s.cmd("LOCK.INFO", key));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("io.hashlock.testing.Matrix#serversAndConnectors")
    void throughClusterClients(TestServer.Kind kind, Connectors via) throws Exception {
        try (TestServer s = TestServer.start(kind, CLUSTER)) {
            s.cmd("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
            assertTrue(waitFor(15_000, () -> ok(s)));
            JedisCluster jc = null;
            RedisClusterClient lc = null;
            Connector connector;
            if (via == Connectors.JEDIS) {
                jc = new JedisCluster(new HostAndPort("127.0.0.1", s.port));
                connector = JedisConnector.cluster(jc);
            } else {
                lc = RedisClusterClient.create(RedisURI.create("redis://127.0.0.1:" + s.port));
                connector = LettuceConnector.cluster(lc, RedisURI.create("redis://127.0.0.1:" + s.port));
            }
            String key = Matrix.key("{order:42}:ship");
            try (Hashlock h = Hashlock.create(connector); Hashlock h2 = Hashlock.create(connector)) {
                Lock a = h.lock(key, LockOptions.builder().token(true).build());
                Lock b = h2.lock(key);
                a.lock();
                assertTrue(a.token() > 0, "the token counter hashes to the lock's slot");
                CompletableFuture<Boolean> waited = onThread(() -> {
                    boolean got = b.tryLock(10, TimeUnit.SECONDS);
                    if (got) b.unlock();
                    return got;
                });
                assertTrue(waitFor(5000, () -> info(s, key) != null && info(s, key).waiters() == 1));
                a.unlock();
                assertTrue(waited.get(10, TimeUnit.SECONDS));
                assertNull(info(s, key));
            } finally {
                if (jc != null) jc.close();
                if (lc != null) lc.shutdown();
            }
        }
    }

    /**
     * The family through a cluster client: keys that share a hash tag work;
     * keys (or derived keys) in different slots are refused with
     * CrossSlotException, nothing changed.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void theFamilyAndCrossSlot(TestServer.Kind kind) throws Exception {
        try (TestServer s = TestServer.start(kind, CLUSTER)) {
            s.cmd("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
            assertTrue(waitFor(15_000, () -> ok(s)));
            try (JedisCluster jc = new JedisCluster(new HostAndPort("127.0.0.1", s.port));
                    Hashlock h = Hashlock.create(JedisConnector.cluster(jc))) {
                String tag = Matrix.key("order");
                MultiLock both = h.multiLock("{" + tag + "}:stock", "{" + tag + "}:payment");
                assertTrue(both.tryLock());
                both.unlock();
                MultiLock apart = h.multiLock(tag + ":stock", tag + ":payment");
                CrossSlotException e = assertThrows(CrossSlotException.class, apart::tryLock);
                assertEquals("CROSSSLOT", e.code());
                assertTrue(e.getMessage().contains("hash tag"), e.getMessage());
                assertNull(info(s, tag + ":stock"), "nothing changed");
                assertFalse(apart.isHeldByCurrentThread());
                // A name with a lone '{': its {name}:timeout lands in another slot.
                Semaphore odd = h.semaphore("a{b" + tag);
                odd.addPermits(2);
                assertThrows(CrossSlotException.class, () -> odd.tryLease(1));
                assertEquals(2, odd.availablePermits(), "nothing changed");
                Semaphore sem = h.semaphore(tag + ":sem");
                sem.trySetPermits(1);
                try (Lease l = sem.lease(1)) {
                    assertEquals(0, sem.availablePermits());
                }
                assertEquals(1, sem.availablePermits());
                ReadWriteLock rw = h.readWriteLock(tag + ":rw");
                rw.writeLock().lock();
                rw.readLock().lock();
                rw.writeLock().unlock();
                rw.readLock().unlock();
                Latch latch = h.latch(tag + ":latch");
                latch.trySetCount(1);
                CompletableFuture<Boolean> w = onThread(() -> latch.await(10, TimeUnit.SECONDS));
                assertTrue(waitFor(5000, () -> ((java.util.List<?>) s.cmd("LOCK.WAITERS", tag + ":latch")).size() == 1));
                latch.countDown();
                assertTrue(w.get(5, TimeUnit.SECONDS));
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void followsAskMovedAndItsSlot(TestServer.Kind kind) throws Exception {
        try (TwoNodes nodes = new TwoNodes(kind); JedisCluster jc = new JedisCluster(new HostAndPort("127.0.0.1", nodes.src.port))) {
            Connector connector = JedisConnector.cluster(jc);
            // ASK: the slot is migrating and the key is not on src yet: the acquire goes to dst with ASKING.
            for (boolean ka : new boolean[] {true, false}) {
                String key = Matrix.key("ask");
                try (Hashlock h = Hashlock.builder(connector).lockOptions(LockOptions.builder().keepalive(ka).checkInterval(Duration.ofMillis(100)).build()).build()) {
                    Lock lock = h.lock(key);
                    nodes.startMigration(key);
                    lock.lock();
                    try (redis.clients.jedis.Jedis j = nodes.dst.jedis()) {
                        TestServer.cmd(j, "ASKING");
                        assertEquals(lock.owner(), text(((java.util.List<?>) TestServer.cmd(j, "HKEYS", key)).get(0)), "granted on dst");
                    }
                    Thread.sleep(300); // checks run on the tie (ASKING) without finding a loss
                    assertTrue(!lock.signal().isLost(), String.valueOf(lock.signal()));
                    nodes.finishMigration(key);
                    lock.unlock();
                    assertNull(info(nodes.dst, key));
                }
            }
            // MOVED: the slot has moved; the client's map still says src.
            String moved = Matrix.key("moved");
            nodes.startMigration(moved);
            nodes.finishMigration(moved);
            try (Hashlock h = Hashlock.create(connector)) {
                Lock lock = h.lock(moved);
                lock.lock();
                assertEquals(lock.owner(), info(nodes.dst, moved).owner());
                lock.unlock();
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void aWaitAndAKeepaliveHoldFollowTheirSlot(TestServer.Kind kind) throws Exception {
        try (TwoNodes nodes = new TwoNodes(kind); JedisCluster jc = new JedisCluster(new HostAndPort("127.0.0.1", nodes.src.port))) {
            Connector connector = JedisConnector.cluster(jc);
            String key = Matrix.key("follow");
            LockOptions fast = LockOptions.builder().checkInterval(Duration.ofMillis(100)).build();
            try (Hashlock a = Hashlock.builder(connector).lockOptions(fast).build(); Hashlock b = Hashlock.builder(connector).lockOptions(fast).build()) {
                Lock holder = a.lock(key);
                Lock waiter = b.lock(key);
                CountDownLatch held = new CountDownLatch(1);
                CountDownLatch release = new CountDownLatch(1);
                CompletableFuture<String> holding = onThread(() -> {
                    holder.lock(); // KEEPALIVE, tied on src
                    held.countDown();
                    release.await();
                    String lost = String.valueOf(holder.signal());
                    holder.unlock();
                    return lost;
                });
                assertTrue(held.await(5, TimeUnit.SECONDS));
                CompletableFuture<Boolean> waiting = onThread(() -> {
                    boolean got = waiter.tryLock(20, TimeUnit.SECONDS);
                    if (got) waiter.unlock();
                    return got;
                });
                assertTrue(waitFor(5000, () -> info(nodes.src, key).waiters() == 1));
                // Reshard the key's slot with the lock in it.
                nodes.startMigration(key);
                nodes.migrate(key);
                nodes.finishMigration(key);
                assertTrue(waitFor(5000, () -> {
                    LockInfo i = info(nodes.dst, key);
                    return i != null && i.waiters() == 1 && i.keepalive();
                }), "the wait was re-issued on dst and the hold tied again there: " + info(nodes.dst, key));
                release.countDown();
                assertEquals("LossSignal[held]", holding.get(10, TimeUnit.SECONDS));
                assertTrue(waiting.get(10, TimeUnit.SECONDS), "the waiter got it on dst");
                assertNull(info(nodes.dst, key));
            }
        }
    }

    /**
     * An election on a key whose slot moved after the cluster client loaded
     * its map: observe() and the term's events follow the key to the node
     * that serves it (the server's MOVED, not the stale map), and the term is
     * revoked as it happens there.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void anElectionFollowsItsKeysNode(TestServer.Kind kind) throws Exception {
        try (TwoNodes nodes = new TwoNodes(kind); JedisCluster jc = new JedisCluster(new HostAndPort("127.0.0.1", nodes.src.port))) {
            for (TestServer s : new TestServer[] {nodes.src, nodes.dst}) s.cmd("CONFIG", "SET", "notify-keyspace-events", "Kd");
            String key = Matrix.key("{election}");
            nodes.startMigration(key);
            nodes.finishMigration(key); // the map still says src
            try (Hashlock h = Hashlock.create(JedisConnector.cluster(jc)); Hashlock ho = Hashlock.create(JedisConnector.cluster(jc));
                    ElectionTest.Events o = new ElectionTest.Events(ho.election(key))) {
                o.expect(ElectionEvent.Kind.NO_LEADER, null);
                Leadership term = h.election(key, ElectionOptions.builder().id("node-a").checkInterval(Duration.ofHours(1)).build()).campaign();
                assertEquals("node-a", info(nodes.dst, key).owner());
                o.expect(ElectionEvent.Kind.NEW_LEADER, "node-a");
                Thread.sleep(50); // the term's subscription is made beside its grant
                nodes.dst.cmd("LOCK.FORCERELEASE", key);
                term.signal().future().get(1, TimeUnit.SECONDS); // the events (checks run every 10 s here)
                o.expect(ElectionEvent.Kind.NO_LEADER, null);
            }
        }
    }
}
