package io.hashlock.lettuce;

import io.hashlock.Connector;
import io.hashlock.internal.Handshake;
import io.lettuce.core.RedisCredentials;
import io.lettuce.core.RedisCredentialsProvider;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SslVerifyMode;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;

/**
 * hashlock on Lettuce: the server of a {@link RedisURI} (or, with a
 * {@link RedisClusterClient}, the node that serves a key, from the client's
 * partitions) and the URI's settings: credentials, database, client name,
 * connect timeout, TLS ({@code rediss://}, with the JVM's default trust
 * store, or the {@link SSLSocketFactory} you give).
 *
 * <pre>{@code
 * Hashlock hashlock = Hashlock.create(LettuceConnector.standalone(RedisURI.create("redis://127.0.0.1:6380")));
 * Hashlock onCluster = Hashlock.create(LettuceConnector.cluster(clusterClient, seedUri));
 * }</pre>
 */
public final class LettuceConnector implements Connector {
    private final RedisURI uri;
    private final RedisClusterClient cluster;
    private final SSLSocketFactory ssl;
    private final List<List<byte[]>> handshake;

    private LettuceConnector(RedisURI uri, RedisClusterClient cluster, SSLSocketFactory ssl) {
        this.uri = Objects.requireNonNull(uri);
        this.cluster = cluster;
        this.ssl = ssl != null ? ssl : uri.isSsl() ? (SSLSocketFactory) SSLSocketFactory.getDefault() : null;
        this.handshake = handshake(uri);
    }

    public static LettuceConnector standalone(RedisURI uri) {
        return new LettuceConnector(uri, null, null);
    }

    /** With your own TLS socket factory (client certificates, a private CA). */
    public static LettuceConnector standalone(RedisURI uri, SSLSocketFactory ssl) {
        return new LettuceConnector(uri, null, ssl);
    }

    /**
     * A cluster: keys are routed with {@code client}'s partitions;
     * {@code settings} gives credentials and TLS (its host is not used).
     */
    public static LettuceConnector cluster(RedisClusterClient client, RedisURI settings) {
        return new LettuceConnector(settings, Objects.requireNonNull(client), null);
    }

    public static LettuceConnector cluster(RedisClusterClient client, RedisURI settings, SSLSocketFactory ssl) {
        return new LettuceConnector(settings, Objects.requireNonNull(client), ssl);
    }

    @Override
    public Node nodeFor(byte[] key) {
        if (cluster == null) return new Node(uri.getHost(), uri.getPort());
        int slot = SlotHash.getSlot(key);
        RedisClusterNode n = cluster.getPartitions().getPartitionBySlot(slot);
        if (n == null) {
            cluster.refreshPartitions();
            n = cluster.getPartitions().getPartitionBySlot(slot);
        }
        if (n == null) throw new IllegalStateException("no cluster node serves slot " + slot);
        return new Node(n.getUri().getHost(), n.getUri().getPort());
    }

    @Override
    public Socket connect(Node node) throws IOException {
        Duration timeout = uri.getTimeout();
        int ms = timeout == null ? 10_000 : (int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis()));
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress(node.host(), node.port()), ms);
            if (ssl == null) return s;
            SSLSocket t = (SSLSocket) ssl.createSocket(s, node.host(), node.port(), true);
            if (uri.getVerifyMode() == SslVerifyMode.FULL) {
                SSLParameters p = t.getSSLParameters();
                p.setEndpointIdentificationAlgorithm("HTTPS");
                t.setSSLParameters(p);
            }
            t.startHandshake();
            return t;
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
    }

    @Override
    public List<List<byte[]>> handshake() {
        return handshake;
    }

    @Override
    public void moved(int slot, Node node) {
        if (cluster != null) cluster.refreshPartitionsAsync();
    }

    private static List<List<byte[]>> handshake(RedisURI uri) {
        RedisCredentialsProvider p = uri.getCredentialsProvider();
        RedisCredentials c = null;
        if (p instanceof RedisCredentialsProvider.ImmediateRedisCredentialsProvider i) {
            c = i.resolveCredentialsNow();
        } else if (p != null) {
            c = p.resolveCredentials().block(Duration.ofSeconds(30));
        }
        String user = c != null && c.hasUsername() ? c.getUsername() : null;
        char[] password = c != null && c.hasPassword() ? c.getPassword() : null;
        return Handshake.of(user, password, uri.getDatabase(), uri.getClientName());
    }
}
