package io.hashlock;

import io.hashlock.internal.RespConnection;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Watches one hold and fires its {@link LossSignal} when the hold ends other
 * than by its owner's release. Three sources: the hold's connection (its end
 * is seen at once by the connection's reader), the key's lifecycle keyspace
 * events ({@code lock.expired}, {@code lock.forced}, {@code lock.closed}, and
 * the server's own {@code del}/{@code evicted} when those classes are on:
 * each makes the watch look at the hold at once, see {@link #events}), and a
 * periodic check of the hold (what no event announced: a DEL when only class
 * {@code d} is on, a failover; and the watchdog's renewals).
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
    private List<io.hashlock.internal.Subscriber.KeyWatch> events = List.of();
    private boolean stopped;
    private boolean checking;
    /** A check asked for while one ran: run after it (an event must not be lost). */
    private Check again;

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

    /**
     * The key's event subscription (replacing the one before: the key moved
     * to another node): {@link #look} is called when an event arrives; the
     * subscription ends with the watch.
     */
    void events(io.hashlock.internal.Subscriber.KeyWatch w) {
        events(List.of(w));
    }

    /** As {@link #events(io.hashlock.internal.Subscriber.KeyWatch)}, for a hold of several keys (one watch each). */
    void events(List<io.hashlock.internal.Subscriber.KeyWatch> ws) {
        List<io.hashlock.internal.Subscriber.KeyWatch> previous;
        synchronized (this) {
            if (stopped) {
                previous = ws;
            } else {
                previous = events;
                events = List.copyOf(ws);
            }
        }
        for (io.hashlock.internal.Subscriber.KeyWatch p : previous) p.close();
    }

    /** Runs {@code check} now on a worker thread (after the one running, if any). */
    void look(Check check) {
        submit(check, true);
    }

    private void submit(Check check) {
        submit(check, false);
    }

    private void submit(Check check, boolean queue) {
        synchronized (this) {
            if (stopped) return;
            if (checking) {
                if (queue) again = check;
                return;
            }
            checking = true;
        }
        try {
            hashlock.workers().execute(() -> {
                Check next = check;
                while (next != null) {
                    try {
                        synchronized (this) {
                            if (stopped) return;
                        }
                        next.run();
                    } catch (LockLostException e) {
                        lost(e);
                    } catch (Exception e) {
                        // a failed check: the check decides when that means a loss
                    } finally {
                        synchronized (this) {
                            next = stopped ? null : again;
                            again = null;
                            if (next == null) checking = false;
                        }
                    }
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            synchronized (this) {
                checking = false;
            }
        }
    }

    private void connectionLost(IOException e) {
        lost(new LockLostException(LossReason.CONNECTION_LOST,
                what + ": its connection was lost (" + e.getMessage() + "); the server releases a KEEPALIVE hold when its connection goes", e));
    }

    /** Fires the signal (once) and stops watching; nothing once stopped (the hold ended). */
    void lost(LockLostException e) {
        synchronized (this) {
            if (stopped) return;
        }
        stop();
        signal.fire(e);
    }

    /** Stops watching; the signal does not fire from here on. */
    void stop() {
        List<io.hashlock.internal.Subscriber.KeyWatch> ws;
        synchronized (this) {
            stopped = true;
            if (poll != null) poll.cancel(false);
            if (watched != null) watched.removeOnLost(connectionLost);
            ws = events;
            events = List.of();
        }
        for (io.hashlock.internal.Subscriber.KeyWatch w : ws) w.close();
    }

    synchronized boolean stopped() {
        return stopped;
    }
}
