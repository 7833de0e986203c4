package io.hashlock;

import java.io.IOException;
import java.net.Socket;
import java.util.List;

/**
 * Where a key's lock lives and how to reach it: the small interface between
 * hashlock and a Redis client library. {@link io.hashlock.jedis.JedisConnector}
 * and {@link io.hashlock.lettuce.LettuceConnector} take it from a Jedis or
 * Lettuce client (standalone or cluster); implement it for anything else.
 *
 * <p>hashlock sends its commands on connections of its own, opened with
 * {@link #connect} and kept in a pool ({@link Hashlock}), never on the
 * application's client: a lock's connection must not be shared (a KEEPALIVE
 * lock lives exactly as long as it), must not time out a wait the server may
 * still grant, and must never retry or re-send a command (a re-sent BLOCK
 * loses its place in the queue; a re-sent RELEASE drops a second hold).
 */
public interface Connector {

    /** A node's address. */
    record Node(String host, int port) {
        @Override
        public String toString() {
            return host + ":" + port;
        }
    }

    /** The node that serves {@code key} now (standalone: the server). */
    Node nodeFor(byte[] key);

    /**
     * A connected socket to {@code node}, with the client's transport
     * settings (TLS, connect timeout). hashlock sets its own read timeouts.
     */
    Socket connect(Node node) throws IOException;

    /**
     * Commands sent first on every new connection (AUTH, SELECT, CLIENT
     * SETNAME); each must answer without an error.
     */
    List<List<byte[]>> handshake();

    /**
     * A hint that {@code slot} moved to {@code node} (a MOVED reply):
     * cluster connectors may refresh their view. hashlock already follows
     * the redirect itself.
     */
    default void moved(int slot, Node node) {}
}
