package hashlock_test

// Connections are reused: a cleanly released lock's connection and an
// answered wait's connection go back to the pool; only a cancelled or
// timed-out call closes its connection. Counted on the server
// (total_connections_received), so nothing the library says is trusted.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"hashlock"
	"hashlock/internal/testserver"
)

const pairs = 1000

func TestConnectionsAreReused(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		pair := func(lock *hashlock.Lock) {
			h, err := lock.Acquire(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Release(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		lock := e.hl.NewLock(key, mode...)
		pair(lock) // warm up: the pool's first connection
		// and the subscriber connection (lifecycle events), beside it
		eventually(t, "the lock's event subscription", func() bool { return hashlock.Subscribed(e.hl, key) })
		before := e.connectionsReceived()
		started := time.Now()
		for i := 0; i < pairs; i++ {
			pair(lock)
		}
		elapsed := time.Since(started)
		// A Lock object per acquisition (a new owner each time) too.
		for i := 0; i < pairs; i++ {
			pair(e.hl.NewLock(key, mode...))
		}
		opened := e.connectionsReceived() - before
		t.Logf("uncontended: %.0f acquire/release pairs/s on one Lock; %d new connections for %d acquisitions",
			float64(pairs)/elapsed.Seconds(), opened, 2*pairs)
		if opened > 1 {
			t.Fatalf("%d new connections for %d acquisitions: want none in steady state", opened, 2*pairs)
		}

		// Contended: four goroutines, each its own Lock, waiting in the
		// server's queue for one another.
		const workers = 4
		before = e.connectionsReceived()
		started = time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lock := e.hl.NewLock(key, mode...)
				for i := 0; i < pairs/workers; i++ {
					pair(lock)
				}
			}()
		}
		wg.Wait()
		elapsed = time.Since(started)
		opened = e.connectionsReceived() - before
		t.Logf("contended (%d goroutines): %.0f pairs/s; %d new connections for %d acquisitions",
			workers, float64(pairs)/elapsed.Seconds(), opened, pairs)
		// The pool grows to the number of connections in use at once (the
		// holder and the waiters), then stays.
		if opened > workers+1 {
			t.Fatalf("%d new connections for %d contended acquisitions", opened, pairs)
		}

		// A cancelled wait closes its connection (and only that one).
		e = newEnv(t, s)
		holder := mustAcquire(t, e, e.hl.NewLock(key, mode...))
		// The Client's subscriber connection (lifecycle events) opens
		// beside its first acquisition.
		eventually(t, "the holder's event subscription", func() bool { return hashlock.Subscribed(e.hl, key) })
		before = e.connectionsReceived()
		clients := e.connectedClients()
		ctx, cancel := context.WithCancel(e.ctx)
		go func() {
			eventually(t, "the waiter queued", func() bool { return e.waiters(key) == 1 })
			cancel()
		}()
		if _, err := e.hl.NewLock(key, mode...).Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		eventually(t, "the server to see the waiter's connection closed", func() bool { return e.connectedClients() == clients })
		if err := holder.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		pair(lock)
		pair(lock)
		// KEEPALIVE: the wait's connection; watchdog: the holder's was
		// idle, the wait took it, and the give-back of a grant that may
		// have been on its way opens one (two if it overlaps the release).
		if opened := e.connectionsReceived() - before; opened < 1 || opened > 2 {
			t.Fatalf("%d new connections for one cancelled wait and two pairs, want 1 or 2", opened)
		}
	})
}

// A pooled connection the server closed while idle is not handed out.
func TestDeadPooledConnectionsAreSkipped(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		lock := e.hl.NewLock(newKey())
		h := mustAcquire(t, e, lock)
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.hl.Stats(); st.Idle != 1 {
			t.Fatalf("stats %+v: want the released lock's connection idle", st)
		}
		// Kill every client but the assertion client's connection.
		if err := e.rdb.Do(e.ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		h = mustAcquire(t, e, lock)
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.hl.Stats(); st.Dials != 2 || st.Idle != 1 {
			t.Fatalf("stats %+v: want a second connection dialed and pooled", st)
		}
	})
}

// go test -bench AcquireRelease -run '^$' : acquire/release pairs on Redis
// with the default (KEEPALIVE) lock and with the watchdog, each with the
// pool and without it (WithMaxIdleConns(0): a new connection per
// acquisition, as before the pool). Reports the connections opened per
// 1000 acquisitions, counted by the server.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []hashlock.LockOption
	}{{"keepalive", nil}, {"watchdog", []hashlock.LockOption{hashlock.WithoutKeepalive()}}} {
		for _, pool := range []struct {
			name string
			max  int
		}{{"pool", hashlock.DefaultMaxIdleConns}, {"nopool", 0}} {
			b.Run(mode.name+"/"+pool.name, func(b *testing.B) {
				rdb := servers[0].Client()
				defer rdb.Close()
				hl := hashlock.New(rdb, hashlock.WithMaxIdleConns(pool.max))
				defer hl.Close()
				e := &env{t: b, rdb: rdb, hl: hl, ctx: context.Background()}
				lock := hl.NewLock(newKey(), mode.opts...)
				before := e.connectionsReceived()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					h, err := lock.Acquire(e.ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := h.Release(e.ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				opened := e.connectionsReceived() - before
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
				b.ReportMetric(float64(opened)*1000/float64(b.N), "conns/1000acq")
			})
		}
	}
}
