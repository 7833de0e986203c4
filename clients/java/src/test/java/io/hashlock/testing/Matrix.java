package io.hashlock.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.params.provider.Arguments;

/** Parameter sources: every server kind, with each adapter. */
public final class Matrix {
    private Matrix() {}

    public static Stream<Arguments> servers() {
        return Stream.of(TestServer.Kind.values()).map(Arguments::of);
    }

    public static Stream<Arguments> serversAndConnectors() {
        List<Arguments> all = new ArrayList<>();
        for (TestServer.Kind k : TestServer.Kind.values()) {
            for (Connectors c : Connectors.values()) all.add(Arguments.of(k, c));
        }
        return all.stream();
    }

    /** A key no other test uses. */
    public static String key(String prefix) {
        return prefix + ":" + UUID.randomUUID().toString().substring(0, 12);
    }
}
