package io.hashlock;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Tells a holder that its hold ended other than by its own release: its
 * connection closed or failed (server shutdown, {@code CLIENT KILL}, a
 * reset), the lock was force-released, its lease lapsed, a renewal failed.
 * One signal per hold (from the acquisition that took it to its last
 * release); it fires at most once.
 *
 * <p>Until the server sends lifecycle events, hashlock learns of a loss by
 * watching the hold's own connection (at once) and by checking the hold
 * every {@link LockOptions.Builder#checkInterval check interval} (a
 * force-release or a lapsed lease: within that interval).
 */
public final class LossSignal {
    private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();

    LossSignal() {}

    /** True once the hold was found lost. */
    public boolean isLost() {
        return lost.isDone();
    }

    /** Why it was lost, once it was. */
    public Optional<LockLostException> cause() {
        return Optional.ofNullable(lost.getNow(null));
    }

    /** Throws the loss if the hold was found lost; use it before each step of long work. */
    public void throwIfLost() {
        LockLostException e = lost.getNow(null);
        if (e != null) throw e;
    }

    /**
     * Calls {@code listener} once when the hold is found lost (at once if it
     * already was), on a hashlock thread: keep it short (e.g. interrupt the
     * worker, cancel a future).
     */
    public void onLost(Consumer<LockLostException> listener) {
        lost.thenAccept(listener);
    }

    /** A future completed (never exceptionally) with the loss. */
    public CompletableFuture<LockLostException> future() {
        return lost.copy();
    }

    /** Fires the signal; false if it had fired already. */
    boolean fire(LockLostException e) {
        return lost.complete(e);
    }

    @Override
    public String toString() {
        LockLostException e = lost.getNow(null);
        return e == null ? "LossSignal[held]" : "LossSignal[lost: " + e.reason() + ": " + e.getMessage() + "]";
    }
}
