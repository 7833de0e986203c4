package io.hashlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hashlock.testing.TestServer;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * The README's example, compiled and run as it stands (only the port is
 * changed), against a real server: clients/java/README.md's first java block
 * and the Java example of the repository's README.
 */
class ReadmeTest {
    static final Path REPO = Path.of(TestServer.module()).getParent().getParent().getParent();

    /** The java blocks of a markdown text, in order. */
    static List<String> javaBlocks(String md) {
        List<String> blocks = new ArrayList<>();
        Matcher m = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(md);
        while (m.find()) blocks.add(m.group(1));
        return blocks;
    }

    /** Compiles {@code body} into a class with {@code shipOrder(int)} that records what it saw, and runs it. */
    static List<String> run(String body, int port) throws Exception {
        return run(body, port, "");
    }

    /** Helpers of the election example: {@code lead(long)} records the term it got, {@code stopLeading()} that it was told. */
    static final String ELECTION_HELPERS =
            "  static void lead(long term) { SEEN.add(\"led term>0=\" + (term > 0)); }\n"
            + "  static void stopLeading() { SEEN.add(\"told to stop\"); }\n";

    /** As {@link #run(String, int)}, with {@code helpers} (more methods) in the class. */
    static List<String> run(String body, int port, String helpers) throws Exception {
        String src = "import io.hashlock.*;\nimport io.hashlock.jedis.JedisConnector;\nimport java.util.concurrent.TimeUnit;\n"
                + "public class ReadmeExample {\n"
                + "  public static final java.util.List<String> SEEN = new java.util.ArrayList<>();\n"
                + "  static void shipOrder(int id) {\n"
                + "    try (redis.clients.jedis.Jedis j = new redis.clients.jedis.Jedis(\"127.0.0.1\", " + port + ")) {\n"
                + "      Object info = j.sendCommand(() -> \"LOCK.INFO\".getBytes(), \"orders:\" + id);\n"
                + "      SEEN.add(\"shipped \" + id + \" held=\" + (info != null));\n"
                + "    }\n"
                + "  }\n"
                + helpers
                + "  public static void main() throws Exception {\n" + body.replace("6380", Integer.toString(port)) + "  }\n}\n";
        Path dir = Files.createTempDirectory("hashlock-readme");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        try (StandardJavaFileManager fm = javac.getStandardFileManager(null, null, null)) {
            SimpleJavaFileObject file = new SimpleJavaFileObject(URI.create("string:///ReadmeExample.java"), javax.tools.JavaFileObject.Kind.SOURCE) {
                @Override
                public CharSequence getCharContent(boolean ignore) {
                    return src;
                }
            };
            List<String> opts = List.of("-classpath", System.getProperty("java.class.path"), "-d", dir.toString());
            assertTrue(javac.getTask(null, fm, null, opts, null, List.of(file)).call(), "the README example compiles:\n" + src);
        }
        try (URLClassLoader cl = new URLClassLoader(new URL[] {dir.toUri().toURL()}, ReadmeTest.class.getClassLoader())) {
            Class<?> c = cl.loadClass("ReadmeExample");
            Method main = c.getMethod("main");
            main.invoke(null);
            @SuppressWarnings("unchecked")
            List<String> seen = (List<String>) c.getField("SEEN").get(null);
            return seen;
        }
    }

    @Test
    void theLibraryReadmeExampleRuns() throws Exception {
        TestServer s = TestServer.shared(TestServer.Kind.REDIS);
        String example = javaBlocks(Files.readString(REPO.resolve("clients/java/README.md"))).get(0);
        assertEquals(List.of("shipped 42 held=true"), run(example, s.port));
        assertEquals(null, s.cmd("LOCK.INFO", "orders:42"), "released at the end");
    }

    @Test
    void theRepositoryReadmeJavaExampleRuns() throws Exception {
        TestServer s = TestServer.shared(TestServer.Kind.VALKEY);
        String readme = Files.readString(REPO.resolve("README.md"));
        String heading = "### Client libraries in this repository";
        int from = readme.indexOf(heading);
        assertTrue(from >= 0, heading);
        int to = readme.indexOf("\n### ", from + heading.length());
        List<String> blocks = javaBlocks(readme.substring(from, to));
        assertEquals(1, blocks.size(), "one Java example in the README's client section");
        assertEquals(List.of("shipped 42 held=true"), run(blocks.get(0), s.port));
        assertEquals(null, s.cmd("LOCK.INFO", "orders:42"));
    }

    /** The family's example of clients/java/README.md (the block with {@code semaphore(}). */
    @Test
    void theFamilyExampleRuns() throws Exception {
        String lib = Files.readString(REPO.resolve("clients/java/README.md"));
        List<String> examples = new ArrayList<>();
        for (String b : javaBlocks(lib)) if (b.contains("semaphore(")) examples.add(b);
        assertEquals(1, examples.size(), "one family example");
        String helpers = "  static void render(java.util.List<String> what) { SEEN.add(\"render \" + what.size()); }\n"
                + "  static void merge() { SEEN.add(\"merge\"); }\n"
                + "  static void transfer(String from, String to, int n) { SEEN.add(\"transfer \" + from + \" \" + to + \" \" + n); }\n";
        for (TestServer.Kind kind : TestServer.Kind.values()) {
            TestServer s = TestServer.shared(kind);
            s.cmd("DEL", "render:licenses", "{render:licenses}:timeout", "batch:7:ready", "catalog", "{acct}:alice", "{acct}:bob");
            assertEquals(List.of("render 1", "merge", "render 1", "transfer alice bob 10"), run(examples.get(0), s.port, helpers));
            assertEquals(2L, Long.parseLong(TestServer.text(s.cmd("GET", "render:licenses"))), "the permit was returned");
            assertEquals(null, s.cmd("RWLOCK.INFO", "catalog"));
            assertEquals(null, s.cmd("LOCK.INFO", "{acct}:alice"));
            assertEquals(null, s.cmd("LOCK.INFO", "{acct}:bob"));
        }
    }

    /** The election example of clients/java/README.md, and the Java one of the repository README's "Leader election". */
    @Test
    void theElectionExamplesRun() throws Exception {
        String lib = Files.readString(REPO.resolve("clients/java/README.md"));
        String root = Files.readString(REPO.resolve("README.md"));
        int at = root.indexOf("\n## Leader election");
        assertTrue(at >= 0, "README.md: no Leader election section");
        int end = root.indexOf("\n## ", at + 1);
        List<String> examples = new ArrayList<>();
        for (String b : javaBlocks(lib)) if (b.contains("election(")) examples.add(b);
        examples.addAll(javaBlocks(root.substring(at, end < 0 ? root.length() : end)));
        assertEquals(2, examples.size(), "one election example in each README");
        for (TestServer.Kind kind : TestServer.Kind.values()) {
            TestServer s = TestServer.shared(kind);
            for (String example : examples) {
                java.io.PrintStream out = System.out;
                java.io.ByteArrayOutputStream printed = new java.io.ByteArrayOutputStream();
                List<String> seen;
                System.setOut(new java.io.PrintStream(printed, true));
                try {
                    seen = run(example, s.port, ELECTION_HELPERS);
                } finally {
                    System.setOut(out);
                }
                assertEquals(List.of("led term>0=true"), seen, kind + ": " + example);
                String text = printed.toString();
                // The observer prints on its own thread, until the example closes it.
                for (String line : text.split("\\R")) {
                    if (line.isEmpty()) continue;
                    assertTrue(line.matches("observer: (NO_LEADER|(ELECTED|REVOKED) node-a term \\d{16,})"), kind + " printed:\n" + text);
                }
                System.out.print(text);
                assertEquals(null, s.cmd("LOCK.INFO", "billing:leader"), "resigned at the end");
            }
        }
    }
}
