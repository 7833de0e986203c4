package io.hashlock.testing;

import io.hashlock.Connector;
import io.hashlock.Hashlock;
import io.hashlock.LockOptions;
import io.hashlock.jedis.JedisConnector;
import io.hashlock.lettuce.LettuceConnector;
import io.lettuce.core.RedisURI;

/** The two adapters the library tests run with. */
public enum Connectors {
    JEDIS,
    LETTUCE;

    public Connector standalone(int port) {
        return switch (this) {
            case JEDIS -> JedisConnector.standalone("127.0.0.1", port);
            case LETTUCE -> LettuceConnector.standalone(RedisURI.create("redis://127.0.0.1:" + port));
        };
    }

    public Hashlock hashlock(int port) {
        return Hashlock.create(standalone(port));
    }

    public Hashlock hashlock(int port, LockOptions options) {
        return Hashlock.builder(standalone(port)).lockOptions(options).build();
    }

    @Override
    public String toString() {
        return name().toLowerCase();
    }
}
