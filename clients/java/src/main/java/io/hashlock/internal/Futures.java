package io.hashlock.internal;

import io.hashlock.ConnectionException;
import io.hashlock.HashlockException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Waiting for a reply: interruptibly or not, with or without a client-side limit. */
public final class Futures {
    private Futures() {}

    /** The client gave up waiting for an answer. */
    public static final class ClientTimeoutException extends Exception {
        private static final long serialVersionUID = 1L;

        public ClientTimeoutException(String message) {
            super(message);
        }
    }

    /**
     * The reply of {@code f}. {@code timeoutMs} ≤ 0: no limit. Not
     * interruptible: an interrupt is remembered and set again on return.
     */
    public static Object await(CompletableFuture<Object> f, long timeoutMs, boolean interruptible)
            throws InterruptedException, ClientTimeoutException {
        long deadline = timeoutMs > 0 ? System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs) : 0;
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    if (deadline == 0) return f.get();
                    long left = deadline - System.nanoTime();
                    if (left <= 0) throw new ClientTimeoutException("no answer within " + timeoutMs + " ms");
                    return f.get(left, TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    if (interruptible) throw e;
                    interrupted = true;
                } catch (TimeoutException e) {
                    throw new ClientTimeoutException("no answer within " + timeoutMs + " ms");
                } catch (ExecutionException e) {
                    Throwable c = e.getCause();
                    if (c instanceof HashlockException h) throw h;
                    throw new ConnectionException(String.valueOf(c.getMessage()), c);
                }
            }
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /** {@link #await} without interrupts; a client-side timeout becomes a ConnectionException. */
    public static Object awaitShort(CompletableFuture<Object> f, long timeoutMs) {
        try {
            return await(f, timeoutMs, false);
        } catch (InterruptedException e) {
            throw new AssertionError(e); // not interruptible
        } catch (ClientTimeoutException e) {
            throw new ConnectionException("the server did not answer within " + timeoutMs + " ms", e);
        }
    }
}
