package io.hashlock.interop;

import io.hashlock.Hashlock;
import io.hashlock.Lock;
import io.hashlock.LockOptions;
import io.hashlock.jedis.JedisConnector;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.Jedis;

/**
 * The native side of the mixed-fleet churn, as a process of its own (so it
 * can be SIGKILLed): threads taking hashlock locks on the churn's keys and,
 * inside each hold, a slow read-modify-write of the key's counter.
 *
 * <p>Every event is one line, written with one write(2) and no buffering,
 * so a SIGKILL loses at most the line being written: {@code A <key> <t> <thread>}
 * after an acquisition returned, {@code S <key>} after the counter write was
 * acknowledged, {@code R <key> <t> <thread>} before the release is sent, and
 * {@code X <key>} when the hold was found lost. Times are
 * {@link System#nanoTime()}: CLOCK_MONOTONIC on Linux, one clock for every
 * process of the machine.
 *
 * <p>Arguments: port, log file, keepalive (true/false), threads, seed, keys...
 */
public final class NativeWorker {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        OutputStream log = new FileOutputStream(args[1], true);
        boolean keepalive = Boolean.parseBoolean(args[2]);
        int threads = Integer.parseInt(args[3]);
        long seed = Long.parseLong(args[4]);
        String[] keys = java.util.Arrays.copyOfRange(args, 5, args.length);
        LockOptions options = LockOptions.builder().keepalive(keepalive).lease(Duration.ofMillis(keepalive ? 30_000 : 2_000)).build();
        Hashlock hashlock = Hashlock.builder(JedisConnector.standalone("127.0.0.1", port)).lockOptions(options).build();
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            Random rnd = new Random(seed * 31 + i);
            ts[i] = new Thread(() -> run(hashlock, port, keys, rnd, log));
            ts[i].start();
        }
        for (Thread t : ts) t.join();
    }

    static void line(OutputStream log, String s) {
        byte[] b = (s + "\n").getBytes(StandardCharsets.US_ASCII);
        synchronized (log) {
            try {
                log.write(b);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }
    }

    private static void run(Hashlock hashlock, int port, String[] keys, Random rnd, OutputStream log) {
        try (Jedis data = new Jedis("127.0.0.1", port)) {
            while (true) {
                String key = keys[rnd.nextInt(keys.length)];
                Lock lock = hashlock.lock(key);
                boolean got;
                int mode = rnd.nextInt(3);
                if (mode == 0) {
                    lock.lock();
                    got = true;
                } else if (mode == 1) {
                    got = lock.tryLock(rnd.nextInt(400) + 1, TimeUnit.MILLISECONDS);
                } else {
                    got = lock.tryLock();
                }
                if (!got) {
                    Thread.sleep(rnd.nextInt(3));
                    continue;
                }
                line(log, "A " + key + " " + System.nanoTime() + " " + Thread.currentThread().getId());
                try {
                    if (rnd.nextInt(4) == 0) { // a re-entry in the middle
                        lock.lock();
                        lock.unlock();
                    }
                    String v = data.get("counter:" + key);
                    Thread.sleep(rnd.nextInt(6));
                    lock.signal().throwIfLost();
                    data.set("counter:" + key, Long.toString(v == null ? 1 : Long.parseLong(v) + 1));
                    line(log, "S " + key);
                } finally {
                    line(log, "R " + key + " " + System.nanoTime() + " " + Thread.currentThread().getId());
                    try {
                        lock.unlock();
                    } catch (io.hashlock.LockLostException e) {
                        line(log, "X " + key);
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
