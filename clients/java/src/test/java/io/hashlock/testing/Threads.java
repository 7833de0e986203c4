package io.hashlock.testing;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;

/** Runs test bodies on threads of their own (lock owners are threads). */
public final class Threads {
    private Threads() {}

    /** Runs {@code body} on a new daemon thread; the future has its result or exception. */
    public static <T> CompletableFuture<T> onThread(Callable<T> body) {
        CompletableFuture<T> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(body.call());
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        return f;
    }
}
