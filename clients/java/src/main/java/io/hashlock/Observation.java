package io.hashlock;

import io.hashlock.internal.Errors;
import io.hashlock.internal.Resp;
import io.hashlock.internal.Subscriber;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * An election followed by a listener ({@link Election#observe}); close it to
 * stop. The listener runs on this observation's own thread.
 */
public final class Observation implements AutoCloseable {
    private final Election election;
    private final Consumer<ElectionEvent> listener;
    private final Semaphore kicks = new Semaphore(0);
    private final Thread thread;
    private volatile Subscriber.KeyWatch watch;
    private volatile boolean closed;

    Observation(Election election, Consumer<ElectionEvent> listener) {
        this.election = election;
        this.listener = Objects.requireNonNull(listener);
        // Events are published on the node that serves the key: ask first
        // (LOCK.INFO follows a MOVED and the router remembers it).
        Errors.check(election.hashlock().router().call(election.key(), List.of(Resp.bytes("LOCK.INFO"), election.key())));
        this.watch = subscribe(); // errors here are the caller's
        kick();
        this.thread = new Thread(this::run, "hashlock-observe-" + election.name());
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private Subscriber.KeyWatch subscribe() {
        return election.hashlock().subscriber().watch(election.key(), System.nanoTime(), null, this::kick);
    }

    private void kick() {
        if (kicks.availablePermits() == 0) kicks.release();
    }

    private void run() {
        Leader last = null;
        boolean started = false;
        long delay = 10;
        while (!closed && !election.hashlock().closed()) {
            try {
                if (!kicks.tryAcquire(1, TimeUnit.SECONDS)) continue; // only to notice a closed Hashlock
            } catch (InterruptedException e) {
                return;
            }
            kicks.drainPermits();
            LockInfo info;
            try {
                Object reply = election.hashlock().router().call(election.key(), List.of(Resp.bytes("LOCK.INFO"), election.key()));
                info = Lock.parseInfo(Errors.check(reply));
                Subscriber.KeyWatch w = watch;
                if (!w.node().equals(election.hashlock().router().nodeFor(election.key()))) {
                    // The key moved to another node (cluster): follow it there.
                    watch = subscribe();
                    w.close();
                }
            } catch (RuntimeException e) {
                if (closed) return;
                sleep(delay); // the server is away: look again soon
                delay = Math.min(1_000, delay * 2);
                kick();
                continue;
            }
            delay = 10;
            Leader now = info == null ? null : new Leader(info.owner(), info.token());
            for (ElectionEvent ev : changes(last, now, started)) {
                if (closed) return;
                try {
                    listener.accept(ev);
                } catch (RuntimeException e) {
                    // the listener's failure is its own; keep following
                }
            }
            last = now;
            started = true;
        }
    }

    private List<ElectionEvent> changes(Leader last, Leader now, boolean started) {
        List<ElectionEvent> evs = new ArrayList<>(2);
        if (started && Objects.equals(last, now)) return evs;
        if (last != null && last.id().equals(election.id())) evs.add(new ElectionEvent(ElectionEvent.Kind.REVOKED, last));
        if (now == null) evs.add(new ElectionEvent(ElectionEvent.Kind.NO_LEADER, null));
        else if (now.id().equals(election.id())) evs.add(new ElectionEvent(ElectionEvent.Kind.ELECTED, now));
        else evs.add(new ElectionEvent(ElectionEvent.Kind.NEW_LEADER, now));
        return evs;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops following (no listener call starts after this returns, except one already running). */
    @Override
    public void close() {
        closed = true;
        Subscriber.KeyWatch w = watch;
        if (w != null) w.close();
        thread.interrupt();
    }
}
