package io.hashlock.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP proxy on loopback in front of a server, to break connections the
 * ways a network does: reset them (RST), inject bytes that are not RESP,
 * or stop forwarding (a black hole).
 */
public final class Proxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int upstream;
    private final List<Socket[]> pairs = new CopyOnWriteArrayList<>();
    private volatile boolean frozen;

    public Proxy(int upstreamPort) throws IOException {
        this.upstream = upstreamPort;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::accept, "proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    public int port() {
        return listener.getLocalPort();
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                Socket server = new Socket(InetAddress.getLoopbackAddress(), upstream);
                client.setTcpNoDelay(true);
                server.setTcpNoDelay(true);
                Socket[] pair = {client, server};
                pairs.add(pair);
                pump(client, server);
                pump(server, client);
            } catch (IOException e) {
                return;
            }
        }
    }

    private void pump(Socket from, Socket to) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[8192];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (true) {
                    int n = in.read(buf);
                    if (n < 0) break;
                    while (frozen) Thread.sleep(5);
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // the other side went
            }
            close(from);
            close(to);
        }, "proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    /** Resets every client connection (RST to the client) and closes the server side. */
    public void resetAll() {
        for (Socket[] p : pairs) {
            try {
                p[0].setSoLinger(true, 0);
            } catch (IOException ignored) {
                // closing anyway
            }
            close(p[0]);
            close(p[1]);
        }
        pairs.clear();
    }

    /** Sends {@code bytes} to every client as if the server had. */
    public void injectToClients(byte[] bytes) throws IOException {
        for (Socket[] p : pairs) {
            OutputStream out = p[0].getOutputStream();
            synchronized (out) {
                out.write(bytes);
                out.flush();
            }
        }
    }

    /** Stops (true) or resumes (false) forwarding in both directions; connections stay open. */
    public void freeze(boolean frozen) {
        this.frozen = frozen;
    }

    @Override
    public void close() {
        try {
            listener.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        for (Socket[] p : pairs) {
            close(p[0]);
            close(p[1]);
        }
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
