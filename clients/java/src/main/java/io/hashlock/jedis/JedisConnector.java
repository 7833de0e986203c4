package io.hashlock.jedis;

import io.hashlock.Connector;
import io.hashlock.internal.Handshake;
import java.io.IOException;
import java.net.Socket;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.DefaultJedisSocketFactory;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.RedisCredentials;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * hashlock on Jedis: the server (or, with a {@link JedisCluster}, the node
 * that serves a key, from the cluster client's slot map) and the
 * connection settings of a {@link JedisClientConfig}: sockets come from
 * Jedis's own {@link DefaultJedisSocketFactory} (TLS, timeouts, host
 * mapping), the handshake from its credentials, database and client name.
 *
 * <pre>{@code
 * Hashlock hashlock = Hashlock.create(JedisConnector.standalone("127.0.0.1", 6380));
 * Hashlock onCluster = Hashlock.create(JedisConnector.cluster(jedisCluster, clientConfig));
 * }</pre>
 */
public final class JedisConnector implements Connector {
    private final HostAndPort server;
    private final JedisCluster cluster;
    private final JedisClientConfig config;
    private final List<List<byte[]>> handshake;

    private JedisConnector(HostAndPort server, JedisCluster cluster, JedisClientConfig config) {
        this.server = server;
        this.cluster = cluster;
        this.config = Objects.requireNonNull(config);
        this.handshake = handshake(config);
    }

    /** One server, no password, database 0. */
    public static JedisConnector standalone(String host, int port) {
        return standalone(new HostAndPort(host, port), DefaultJedisClientConfig.builder().build());
    }

    /** One server with the settings you give your {@code JedisPooled}/{@code JedisPool}. */
    public static JedisConnector standalone(HostAndPort server, JedisClientConfig config) {
        return new JedisConnector(Objects.requireNonNull(server), null, config);
    }

    /** A cluster: keys are routed with {@code cluster}'s slot map; default settings. */
    public static JedisConnector cluster(JedisCluster cluster) {
        return cluster(cluster, DefaultJedisClientConfig.builder().build());
    }

    /** A cluster, with the settings you gave the {@link JedisCluster}. */
    public static JedisConnector cluster(JedisCluster cluster, JedisClientConfig config) {
        return new JedisConnector(null, Objects.requireNonNull(cluster), config);
    }

    @Override
    public Node nodeFor(byte[] key) {
        if (cluster == null) return new Node(server.getHost(), server.getPort());
        try (Connection c = cluster.getConnectionFromSlot(JedisClusterCRC16.getSlot(key))) {
            HostAndPort hp = c.getHostAndPort();
            return new Node(hp.getHost(), hp.getPort());
        }
    }

    @Override
    public Socket connect(Node node) throws IOException {
        try {
            return new DefaultJedisSocketFactory(new HostAndPort(node.host(), node.port()), config).createSocket();
        } catch (JedisException e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    @Override
    public List<List<byte[]>> handshake() {
        return handshake;
    }

    private static List<List<byte[]>> handshake(JedisClientConfig config) {
        String user = config.getUser();
        String password = config.getPassword();
        Supplier<RedisCredentials> provider = config.getCredentialsProvider();
        if (provider != null) {
            RedisCredentials c = provider.get();
            if (c != null) {
                user = c.getUser();
                password = c.getPassword() == null ? null : new String(c.getPassword());
            }
        }
        return Handshake.of(user, password == null ? null : password.toCharArray(), config.getDatabase(), config.getClientName());
    }
}
