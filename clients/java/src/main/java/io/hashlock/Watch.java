package io.hashlock;

import io.hashlock.internal.RespConnection;
import java.io.IOException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Watches one hold and fires its {@link LossSignal} when the hold ends other
 * than by its owner's release. Two sources until the server has lifecycle
 * events: the hold's connection (its end is seen at once by the connection's
 * reader) and a periodic check of the hold (force-release, a lapsed lease,
 * a failed renewal). When lifecycle keyspace events land, a third source
 * (the key's {@code lock.expired}/{@code lock.forced}/{@code lock.closed})
 * replaces the polling here; the primitives do not change.
 *
 * <p>Shared by every primitive: it knows nothing about locks.
 */
final class Watch {
    /** A check of the hold; runs on a hashlock worker thread and may block. */
    @FunctionalInterface
    interface Check {
        /**
         * Returns normally while the hold is held; throws
         * {@link LockLostException} when it is not. Any other exception is a
         * failed check (the check itself decides when failures mean a loss).
         */
        void run() throws Exception;
    }

    private final Hashlock hashlock;
    private final LossSignal signal;
    private final String what;
    private final Consumer<IOException> connectionLost = this::connectionLost;
    private RespConnection watched;
    private ScheduledFuture<?> poll;
    private boolean stopped;
    private boolean checking;

    Watch(Hashlock hashlock, LossSignal signal, String what) {
        this.hashlock = hashlock;
        this.signal = signal;
        this.what = what;
    }

    LossSignal signal() {
        return signal;
    }

    /** Watches {@code c} (instead of the connection watched so far). */
    synchronized void connection(RespConnection c) {
        if (watched != null) watched.removeOnLost(connectionLost);
        watched = c;
        if (!stopped && c != null) c.onLost(connectionLost);
    }

    /** Runs {@code check} every {@code periodMs} on a worker thread (one at a time). */
    synchronized void poll(long periodMs, Check check) {
        if (stopped) return;
        if (poll != null) poll.cancel(false);
        poll = hashlock.scheduler().scheduleWithFixedDelay(() -> submit(check), periodMs, periodMs, TimeUnit.MILLISECONDS);
    }

    private void submit(Check check) {
        synchronized (this) {
            if (stopped || checking) return;
            checking = true;
        }
        hashlock.workers().execute(() -> {
            try {
                synchronized (this) {
                    if (stopped) return;
                }
                check.run();
            } catch (LockLostException e) {
                lost(e);
            } catch (Exception e) {
                // a failed check: the check decides when that means a loss
            } finally {
                synchronized (this) {
                    checking = false;
                }
            }
        });
    }

    private void connectionLost(IOException e) {
        lost(new LockLostException(LossReason.CONNECTION_LOST,
                what + ": its connection was lost (" + e.getMessage() + "); the server releases a KEEPALIVE hold when its connection goes", e));
    }

    /** Fires the signal (once) and stops watching; nothing once stopped (the hold ended). */
    void lost(LockLostException e) {
        synchronized (this) {
            if (stopped) return;
            stop();
        }
        signal.fire(e);
    }

    /** Stops watching; the signal does not fire from here on. */
    synchronized void stop() {
        stopped = true;
        if (poll != null) poll.cancel(false);
        if (watched != null) watched.removeOnLost(connectionLost);
    }

    synchronized boolean stopped() {
        return stopped;
    }
}
