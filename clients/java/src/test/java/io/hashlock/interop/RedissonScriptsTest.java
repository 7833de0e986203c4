package io.hashlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.TestServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The repository's Redisson-protocol test client (crates/testkit/src/redisson.rs,
 * which the Rust, Python and Node tests and the benchmarks use) against real
 * Redisson: every lock script this Redisson sends (seen with MONITOR) must be
 * one of the test client's constants, byte for byte, and the set sent must be
 * the one the test client documents for this version.
 */
@Tag("redisson")
class RedissonScriptsTest {
    static final Path TESTKIT = Path.of(TestServer.module()).getParent().getParent().getParent().resolve("crates/testkit/src/redisson.rs");

    /** Redisson 4.x probes the server's script support at startup with this; it is no lock script. */
    static final String STARTUP_PROBE = "redis.call('get', KEYS[1]) redis.call('get', KEYS[2])";

    /** The test client's script constants (a Rust "\<newline>" continuation drops the newline and the next line's indent). */
    static Map<String, String> testkitScripts() throws Exception {
        Map<String, String> m = new LinkedHashMap<>();
        Matcher c = Pattern.compile("pub const (\\w+): &str = \"(.*?)\";", Pattern.DOTALL).matcher(Files.readString(TESTKIT));
        while (c.find()) {
            if (!c.group(1).equals("UNLOCK_MESSAGE")) m.put(c.group(1), c.group(2).replaceAll("\\\\\\n\\s*", ""));
        }
        return m;
    }

    /** The constants each Redisson line sends for RLock and RFencedLock (see redisson.rs). */
    static Set<String> expectedFor(String version) {
        int minor = Integer.parseInt(version.split("\\.")[1]);
        if (version.startsWith("3.") && minor <= 21) return Set.of("TRY_LOCK", "UNLOCK", "FORCE_UNLOCK", "RENEW", "FENCED_TRY_LOCK", "FENCED_LOCK");
        if (version.startsWith("3.") && minor <= 23) return Set.of("TRY_LOCK", "UNLOCK_3_22", "FORCE_UNLOCK_3_22", "RENEW", "FENCED_TRY_LOCK", "FENCED_LOCK");
        if (version.startsWith("3.")) throw new IllegalArgumentException("no expectation recorded for Redisson " + version);
        return Set.of("TRY_LOCK", "UNLOCK_3_24", "FORCE_UNLOCK_3_22", "RENEW_BATCH", "FENCED_TRY_LOCK", "FENCED_LOCK");
    }

    static String sha1(String script) throws Exception {
        byte[] d = java.security.MessageDigest.getInstance("SHA-1").digest(script.getBytes(StandardCharsets.UTF_8));
        StringBuilder b = new StringBuilder();
        for (byte x : d) b.append(String.format("%02x", x));
        return b.toString();
    }

    /** MONITOR's quoted arguments, unescaped. */
    static List<String> monitorArgs(String line) {
        List<String> out = new ArrayList<>();
        int i = line.indexOf(']');
        while ((i = line.indexOf('"', i + 1)) >= 0) {
            StringBuilder b = new StringBuilder();
            int j = i + 1;
            while (line.charAt(j) != '"') {
                char ch = line.charAt(j);
                if (ch == '\\') {
                    char n = line.charAt(j + 1);
                    if (n == 'x') {
                        b.append((char) Integer.parseInt(line.substring(j + 2, j + 4), 16));
                        j += 4;
                        continue;
                    }
                    b.append(switch (n) {
                        case 'n' -> '\n';
                        case 'r' -> '\r';
                        case 't' -> '\t';
                        default -> n;
                    });
                    j += 2;
                    continue;
                }
                b.append(ch);
                j++;
            }
            out.add(b.toString());
            i = j;
        }
        return out;
    }

    @Test
    void everyScriptRedissonSendsIsTheTestClients() throws Exception {
        Set<String> seen = new LinkedHashSet<>();
        Set<String> shas = new LinkedHashSet<>();
        try (TestServer s = TestServer.start(TestServer.Kind.REDIS)) {
        try (Socket mon = new Socket("127.0.0.1", s.port)) {
            OutputStream out = mon.getOutputStream();
            out.write("MONITOR\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(mon.getInputStream(), StandardCharsets.ISO_8859_1));
            assertEquals("+OK", in.readLine());
            Thread reader = new Thread(() -> {
                try {
                    for (String line; (line = in.readLine()) != null;) {
                        List<String> a = monitorArgs(line);
                        if (a.size() > 1 && a.get(0).equalsIgnoreCase("EVAL")) seen.add(a.get(1));
                        if (a.size() > 1 && a.get(0).equalsIgnoreCase("EVALSHA")) shas.add(a.get(1));
                        if (a.size() > 2 && a.get(0).equalsIgnoreCase("SCRIPT") && a.get(1).equalsIgnoreCase("LOAD")) seen.add(a.get(2));
                    }
                } catch (Exception e) {
                    // the socket closed
                }
            });
            reader.setDaemon(true);
            reader.start();

            RedissonClient redisson = RedissonClients.create(s.port, 900); // watchdog renews every 300 ms
            try {
                RLock lock = redisson.getLock("scripts:lock");
                lock.lock();
                lock.lock();
                Thread.sleep(700); // the watchdog renews
                lock.unlock();
                lock.unlock();
                assertTrue(lock.tryLock(1, 5, TimeUnit.SECONDS));
                lock.unlock();
                lock.lock();
                assertTrue(lock.forceUnlock());
                RFencedLock fenced = redisson.getFencedLock("scripts:fenced");
                fenced.lockAndGetToken();
                fenced.lock();
                fenced.unlock();
                fenced.unlock();
                fenced.tryLockAndGetToken(1, TimeUnit.SECONDS);
                fenced.unlock();
            } finally {
                redisson.shutdown();
            }
            Thread.sleep(200);
        }
        }
        Map<String, String> testkit = testkitScripts();
        Set<String> matched = new TreeSet<>();
        List<String> unknown = new ArrayList<>();
        synchronized (seen) {
            for (String script : seen) {
                if (script.equals(STARTUP_PROBE)) continue;
                String name = null;
                for (Map.Entry<String, String> e : testkit.entrySet()) if (e.getValue().equals(script)) name = e.getKey();
                if (name == null) unknown.add(script);
                else matched.add(name);
            }
        }
        // Scripts sent by SHA only (EVALSHA) must be the test client's too.
        Map<String, String> bySha = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : testkit.entrySet()) bySha.put(sha1(e.getValue()), e.getKey());
        bySha.put(sha1(STARTUP_PROBE), null);
        for (String sha : shas) {
            if (!bySha.containsKey(sha)) unknown.add("EVALSHA " + sha);
            else if (bySha.get(sha) != null) matched.add(bySha.get(sha));
        }
        System.out.printf("redisson %s sent the test client's %s%n", RedissonClients.VERSION, matched);
        assertEquals(List.of(), unknown, "scripts Redisson " + RedissonClients.VERSION + " sent that crates/testkit/src/redisson.rs does not have");
        assertEquals(new TreeSet<>(expectedFor(RedissonClients.VERSION)), matched);
    }
}
