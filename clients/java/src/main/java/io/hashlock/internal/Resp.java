package io.hashlock.internal;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * RESP2 on the wire: commands out as arrays of bulk strings, replies in as
 * Java values: {@code Long} (integer), {@code byte[]} (bulk string),
 * {@code String} (simple string), {@code List<Object>} (array),
 * {@code null} (nil), {@link ErrorReply} (an error: returned, not thrown,
 * so the caller decides what it means).
 */
public final class Resp {
    private Resp() {}

    /** An error reply: {@code code} is its first word (ERR, NOTOWNER, MOVED, ...). */
    public record ErrorReply(String message) {
        public String code() {
            int sp = message.indexOf(' ');
            return sp < 0 ? message : message.substring(0, sp);
        }
    }

    /** The protocol was broken (a reply that is not RESP2). */
    public static final class ProtocolException extends IOException {
        private static final long serialVersionUID = 1L;

        public ProtocolException(String message) {
            super(message);
        }
    }

    public static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    public static String text(Object reply) {
        if (reply instanceof byte[] b) return new String(b, StandardCharsets.UTF_8);
        return String.valueOf(reply);
    }

    /** One command, encoded. */
    public static byte[] encode(List<byte[]> args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64);
        header(out, '*', args.size());
        for (byte[] a : args) {
            header(out, '$', a.length);
            out.writeBytes(a);
            out.write('\r');
            out.write('\n');
        }
        return out.toByteArray();
    }

    private static void header(ByteArrayOutputStream out, char type, long n) {
        out.write(type);
        out.writeBytes(Long.toString(n).getBytes(StandardCharsets.US_ASCII));
        out.write('\r');
        out.write('\n');
    }

    /** Reads one reply (blocking). EOFException at a clean end of stream. */
    public static Object read(InputStream in) throws IOException {
        int type = in.read();
        if (type < 0) throw new EOFException("the server closed the connection");
        switch (type) {
            case '+':
                return line(in);
            case '-':
                return new ErrorReply(line(in));
            case ':':
                return parseLong(line(in));
            case '$': {
                long n = parseLong(line(in));
                if (n < 0) return null;
                byte[] b = in.readNBytes((int) n);
                if (b.length != n) throw new EOFException("the server closed the connection mid-reply");
                crlf(in);
                return b;
            }
            case '*': {
                long n = parseLong(line(in));
                if (n < 0) return null;
                List<Object> list = new ArrayList<>((int) Math.min(n, 1024));
                for (long i = 0; i < n; i++) list.add(read(in));
                return list;
            }
            default:
                throw new ProtocolException("unexpected reply type byte " + type);
        }
    }

    private static long parseLong(String s) throws ProtocolException {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new ProtocolException("not a number: " + s);
        }
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream sb = new ByteArrayOutputStream(16);
        while (true) {
            int c = in.read();
            if (c < 0) throw new EOFException("the server closed the connection mid-reply");
            if (c == '\r') {
                int n = in.read();
                if (n != '\n') throw new ProtocolException("CR without LF");
                return sb.toString(StandardCharsets.UTF_8);
            }
            sb.write(c);
        }
    }

    private static void crlf(InputStream in) throws IOException {
        if (in.read() != '\r' || in.read() != '\n') throw new ProtocolException("bulk string without CRLF");
    }
}
