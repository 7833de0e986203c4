package io.hashlock;

import io.hashlock.jedis.JedisConnector;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import redis.clients.jedis.Jedis;

/**
 * A candidate of {@link ElectionTakeoverTest}, as a process of its own (so it
 * can be SIGKILLed). It waits for a line on stdin, then campaigns, and
 * reports each term on stdout, one line per write(2):
 * {@code elected <term> <nanoTime> <connection id>}, {@code wrote <term> <1|0>}
 * after writing the term to the fenced resource, {@code revoked <term>
 * <nanoTime> <why>} when told; then it campaigns again. Times are
 * {@link System#nanoTime()} (CLOCK_MONOTONIC, one clock for every process).
 *
 * <p>Arguments: port, key, candidate id, resource key.
 */
public final class ElectionCandidate {
    /** The fenced resource: keeps the highest term written, refuses older ones. */
    static final String FENCED = "local cur = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
            + "if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1]) return 1 end\nreturn 0";

    private static final OutputStream OUT = new FileOutputStream(FileDescriptor.out);

    static void say(String line) {
        byte[] b = (line + "\n").getBytes(StandardCharsets.US_ASCII);
        synchronized (OUT) {
            try {
                OUT.write(b);
            } catch (IOException e) {
                System.exit(3);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String key = args[1];
        String id = args[2];
        String resource = args[3];
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII)).readLine();
        try (Hashlock h = Hashlock.create(JedisConnector.standalone("127.0.0.1", port)); Jedis data = new Jedis("127.0.0.1", port)) {
            Election e = h.election(key, ElectionOptions.builder().id(id).build());
            while (true) {
                Leadership l;
                try {
                    l = e.campaign();
                } catch (RuntimeException x) {
                    say("error " + x);
                    Thread.sleep(10);
                    continue;
                }
                say("elected " + l.term() + " " + System.nanoTime() + " " + l.hold().tie.connection().serverId());
                Object ok = data.eval(FENCED, List.of(resource), List.of(Long.toString(l.term())));
                say("wrote " + l.term() + " " + ok);
                LockLostException lost = l.signal().future().get();
                say("revoked " + l.term() + " " + System.nanoTime() + " " + lost.reason());
            }
        }
    }
}
