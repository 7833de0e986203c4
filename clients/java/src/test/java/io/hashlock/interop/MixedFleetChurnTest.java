package io.hashlock.interop;

import static io.hashlock.testing.TestServer.text;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.TestServer;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import redis.clients.jedis.Jedis;

/**
 * A mixed fleet on the same keys: Redisson threads (RLock and RFencedLock,
 * watchdog) in this JVM, and native processes (hashlock's Lock, KEEPALIVE
 * and watchdog modes) that are SIGKILLed at random — holding, waiting, mid
 * write — and restarted. Every holder records when its acquisition returned
 * and when its release was sent (a killed process: when the kill was
 * sent); no two holders' intervals on one key may overlap. Inside each hold
 * a slow read-modify-write of the key's counter checks the same end to end.
 */
@Tag("redisson")
@Tag("churn")
class MixedFleetChurnTest {
    static final int SECONDS = Integer.getInteger("churn.seconds", 15);
    static final String[] KEYS = {"churn:a", "churn:b", "churn:c"};
    static final int REDISSON_THREADS = 4;
    static final int NATIVE_PROCESSES = 3;
    static final int NATIVE_THREADS = 2;

    record Interval(String holder, String key, long from, long to) {}

    @ParameterizedTest(name = "{0}")
    @MethodSource("io.hashlock.testing.Matrix#servers")
    void noOverlappingHolds(TestServer.Kind kind) throws Exception {
        try (TestServer s = TestServer.start(kind)) {
            Path dir = Files.createTempDirectory("hashlock-churn");
            RedissonClient redisson = RedissonClients.create(s.port, 30_000);
            List<Interval> intervals = Collections.synchronizedList(new ArrayList<>());
            AtomicLong redissonSections = new AtomicLong();
            AtomicLong redissonAcquired = new AtomicLong();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < REDISSON_THREADS; i++) {
                int n = i;
                Thread t = new Thread(() -> redissonLoop(redisson, s.port, n, deadline, intervals, redissonAcquired, redissonSections));
                t.start();
                threads.add(t);
            }
            // The native processes, killed and restarted.
            Random rnd = new Random(kind.ordinal() + 1);
            Process[] procs = new Process[NATIVE_PROCESSES];
            Path[] logs = new Path[NATIVE_PROCESSES];
            Map<Path, Long> killedAt = new HashMap<>();
            int[] generation = new int[NATIVE_PROCESSES];
            for (int p = 0; p < NATIVE_PROCESSES; p++) {
                logs[p] = dir.resolve("native-" + p + "-0.log");
                procs[p] = startNative(s.port, logs[p], p, 0);
            }
            int kills = 0;
            while (System.nanoTime() < deadline) {
                Thread.sleep(1_000 + rnd.nextInt(1_500));
                if (System.nanoTime() >= deadline) break;
                int p = rnd.nextInt(NATIVE_PROCESSES);
                killedAt.put(logs[p], System.nanoTime()); // before the signal: it held at most until then
                procs[p].destroyForcibly(); // SIGKILL
                procs[p].waitFor(10, TimeUnit.SECONDS);
                kills++;
                generation[p]++;
                logs[p] = dir.resolve("native-" + p + "-" + generation[p] + ".log");
                procs[p] = startNative(s.port, logs[p], p, generation[p]);
            }
            for (int p = 0; p < NATIVE_PROCESSES; p++) {
                killedAt.put(logs[p], System.nanoTime());
                procs[p].destroyForcibly();
                procs[p].waitFor(10, TimeUnit.SECONDS);
            }
            for (Thread t : threads) t.join(60_000);
            redisson.shutdown();

            // Read the native histories.
            long nativeAcquired = 0;
            long nativeSections = 0;
            long lostHolds = 0;
            long killedHolding = 0;
            File[] files = dir.toFile().listFiles((d, name) -> name.startsWith("native-") && name.endsWith(".log"));
            for (File f : files) {
                Map<String, Long> open = new HashMap<>();
                for (String line : Files.readAllLines(f.toPath())) {
                    String[] w = line.split(" ");
                    if (w.length < 2) continue; // a torn last line
                    switch (w[0]) {
                        case "A" -> {
                            if (w.length == 4) {
                                open.put(w[1] + " " + w[3], Long.parseLong(w[2]));
                                nativeAcquired++;
                            }
                        }
                        case "S" -> nativeSections++;
                        case "R" -> {
                            if (w.length == 4) {
                                Long from = open.remove(w[1] + " " + w[3]);
                                if (from != null) intervals.add(new Interval(f.getName() + "/" + w[3], w[1], from, Long.parseLong(w[2])));
                            }
                        }
                        case "X" -> lostHolds++;
                        default -> {
                            // torn
                        }
                    }
                }
                long end = killedAt.get(f.toPath());
                for (Map.Entry<String, Long> e : open.entrySet()) {
                    String[] kt = e.getKey().split(" ");
                    intervals.add(new Interval(f.getName() + "/" + kt[1], kt[0], e.getValue(), end));
                    killedHolding++;
                }
            }
            // Overlaps between different holders on one key.
            int violations = overlaps(intervals, 0, true);
            // Control: the same histories as if every holder had acted 20 ms past its release
            // (what trusting a lock after letting go would do): the checker must find those.
            int control = overlaps(intervals, 20_000_000L, false);
            long counters = 0;
            try (Jedis j = s.jedis()) {
                for (String key : KEYS) {
                    String v = j.get("counter:" + key);
                    counters += v == null ? 0 : Long.parseLong(v);
                }
            }
            long sections = redissonSections.get() + nativeSections;
            System.out.printf("churn redisson %s %s %d s: %d acquisitions (Redisson %d, native %d), %d intervals checked, "
                    + "%d critical sections (counters %d), %d SIGKILLs of native processes (%d while the fleet ran, %d at its end) "
                    + "cutting %d holds, %d holds lost, %d overlapping holds "
                    + "(control, holds stretched by 20 ms: %d)%n",
                    RedissonClients.VERSION, kind, SECONDS, redissonAcquired.get() + nativeAcquired, redissonAcquired.get(), nativeAcquired,
                    intervals.size(), sections, counters, kills + NATIVE_PROCESSES, kills, NATIVE_PROCESSES, killedHolding, lostHolds, violations, control);
            assertEquals(0, violations, "overlapping holds");
            assertTrue(control > 0, "the checker finds overlaps in these histories when holds are stretched");
            assertEquals(0, lostHolds, "native holds lost while their process lived");
            assertTrue(counters >= sections && counters <= sections + kills + NATIVE_PROCESSES,
                    "counters " + counters + " vs " + sections + " acknowledged sections (+ at most one unacknowledged write per kill)");
            assertTrue(redissonAcquired.get() > 50 && nativeAcquired > 50, "both sides took the locks");
            assertTrue(kills >= SECONDS / 3, "kills: " + kills);
            deleteTree(dir.toFile());
        }
    }

    /** Pairs of intervals of different holders on one key that overlap, each interval's end moved by {@code stretch}. */
    static int overlaps(List<Interval> all, long stretch, boolean print) {
        int n = 0;
        for (String key : KEYS) {
            List<Interval> iv = new ArrayList<>();
            synchronized (all) {
                for (Interval i : all) if (i.key().equals(key)) iv.add(i);
            }
            iv.sort((a, b) -> Long.compare(a.from(), b.from()));
            List<Interval> active = new ArrayList<>();
            for (Interval i : iv) {
                active.removeIf(a -> a.to() + stretch <= i.from());
                for (Interval a : active) {
                    if (!a.holder().equals(i.holder())) {
                        n++;
                        if (print) System.out.printf("OVERLAP on %s: %s from %d while %s held %d..%d%n", key, i.holder(), i.from(), a.holder(), a.from(), a.to());
                    }
                }
                active.add(i);
            }
        }
        return n;
    }

    private static Process startNative(int port, Path log, int p, int generation) throws Exception {
        boolean keepalive = p != 0; // process 0 runs the watchdog mode (lease 2 s), the others KEEPALIVE
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xss512k", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                "-cp", System.getProperty("java.class.path"),
                NativeWorker.class.getName(),
                Integer.toString(port), log.toString(), Boolean.toString(keepalive), Integer.toString(NATIVE_THREADS),
                Long.toString(p * 1000L + generation)));
        cmd.addAll(List.of(KEYS));
        return new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(new File(log + ".out")).start();
    }

    private static void redissonLoop(RedissonClient redisson, int port, int n, long deadline, List<Interval> intervals,
            AtomicLong acquired, AtomicLong sections) {
        Random rnd = new Random(100 + n);
        String holder = "redisson-thread-" + n;
        try (Jedis data = new Jedis("127.0.0.1", port)) {
            while (System.nanoTime() < deadline) {
                String key = KEYS[rnd.nextInt(KEYS.length)];
                RLock lock = n % 2 == 0 ? redisson.getLock(key) : redisson.getFencedLock(key);
                boolean got = rnd.nextBoolean() ? lock.tryLock(rnd.nextInt(500) + 1, TimeUnit.MILLISECONDS) : lock.tryLock();
                if (!got) {
                    Thread.sleep(rnd.nextInt(3));
                    continue;
                }
                long from = System.nanoTime();
                acquired.incrementAndGet();
                try {
                    String v = data.get("counter:" + key);
                    Thread.sleep(rnd.nextInt(6));
                    data.set("counter:" + key, Long.toString(v == null ? 1 : Long.parseLong(v) + 1));
                    sections.incrementAndGet();
                } finally {
                    intervals.add(new Interval(holder, key, from, System.nanoTime()));
                    lock.unlock();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static String describe(TestServer s) {
        return text(s.cmd("INFO", "server")).lines().filter(l -> l.startsWith("redis_version") || l.startsWith("valkey_version")).findFirst().orElse("");
    }

    private static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) for (File k : kids) deleteTree(k);
        f.delete();
    }
}
