package hashlock_test

// The loss signal: a held lock's Done channel closes, and Err says why, on
// every way the lock or its connection can end, each tested.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

// fast: checks every 100 ms so a force-release or an expiry shows quickly.
var fast = hashlock.WithCheckInterval(100 * time.Millisecond)

// expectLost checks that h reports its loss within d, with a reason
// containing why, and that the Lock is usable again afterwards.
func expectLost(t *testing.T, e *env, lock *hashlock.Lock, h *hashlock.Hold, d time.Duration, why string) {
	t.Helper()
	started := time.Now()
	if !closedWithin(h.Done(), d) {
		t.Fatalf("Done not closed %v after the loss (err %v)", d, h.Err())
	}
	t.Logf("lost after %v: %v", time.Since(started).Round(time.Millisecond), h.Err())
	var lost *hashlock.LostError
	if !errors.Is(h.Err(), hashlock.ErrLockLost) || !errors.As(h.Err(), &lost) || !strings.Contains(h.Err().Error(), why) {
		t.Fatalf("Err %v: want a LostError saying %q", h.Err(), why)
	}
	ctx, cancel := h.Context(e.ctx)
	defer cancel()
	if !errors.Is(context.Cause(ctx), hashlock.ErrLockLost) {
		t.Fatalf("the hold's context: cause %v", context.Cause(ctx))
	}
	if lock.Holds() != 0 {
		t.Fatalf("holds %d after the loss", lock.Holds())
	}
	if err := h.Release(e.ctx); !errors.Is(err, hashlock.ErrLockLost) {
		t.Fatalf("Release after the loss: %v", err)
	}
}

func TestLossSignalKeepalive(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		t.Run("client-kill", func(t *testing.T) {
			e := newEnv(t, s)
			lock := e.hl.NewLock(newKey(), fast)
			h := mustAcquire(t, e, lock)
			if err := e.rdb.ClientKillByFilter(e.ctx, "ID", itoa(hashlock.ConnID(h))).Err(); err != nil {
				t.Fatal(err)
			}
			expectLost(t, e, lock, h, time.Second, "connection closed")
			// A new tenure afterwards.
			h2 := mustAcquire(t, e, lock)
			if err := h2.Release(e.ctx); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("force-release", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			lock := e.hl.NewLock(key, fast)
			h := mustAcquire(t, e, lock)
			e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
			expectLost(t, e, lock, h, 2*time.Second, "gone")
		})
		t.Run("expiry", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			lock := e.hl.NewLock(key, fast)
			h := mustAcquire(t, e, lock)
			e.rdb.PExpire(e.ctx, key, time.Millisecond)
			expectLost(t, e, lock, h, 2*time.Second, "gone")
		})
		t.Run("taken-over", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			lock := e.hl.NewLock(key, fast)
			h := mustAcquire(t, e, lock)
			e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
			e.rdb.Do(e.ctx, "LOCK.ACQUIRE", key, "someone-else", "PX", 30000)
			expectLost(t, e, lock, h, 2*time.Second, "gone")
		})
		t.Run("server-shutdown", func(t *testing.T) {
			own, err := testserver.Start(s.Kind, testserver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer own.Stop()
			e := newEnvAt(t, own.Addr) // no retries of SHUTDOWN
			lock := e.hl.NewLock(newKey(), hashlock.WithCheckInterval(time.Hour))
			h := mustAcquire(t, e, lock)
			_ = e.rdb.ShutdownNoSave(e.ctx).Err()
			expectLost(t, e, lock, h, 2*time.Second, "connection closed")
		})
		t.Run("connection-reset", func(t *testing.T) {
			proxy, err := testserver.StartProxy(s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			e := newEnvAt(t, proxy.Addr)
			key := newKey()
			lock := e.hl.NewLock(key, hashlock.WithCheckInterval(time.Hour))
			h := mustAcquire(t, e, lock)
			proxy.Reset()
			expectLost(t, e, lock, h, time.Second, "connection closed")
			direct := newEnv(t, s)
			eventually(t, "the server to release the lock", func() bool { return direct.info(key) == nil })
		})
		t.Run("silent-network", func(t *testing.T) {
			proxy, err := testserver.StartProxy(s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			e := newEnvAt(t, proxy.Addr, hashlock.WithCallTimeout(300*time.Millisecond))
			lock := e.hl.NewLock(newKey(), fast)
			h := mustAcquire(t, e, lock)
			proxy.Pause()
			expectLost(t, e, lock, h, 3*time.Second, "failed a check")
		})
	})
}

func TestLossSignalWatchdog(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		t.Run("force-release", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			lock := e.hl.NewLock(key, hashlock.WithoutKeepalive(), fast)
			h := mustAcquire(t, e, lock)
			e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
			expectLost(t, e, lock, h, 2*time.Second, "gone")
		})
		t.Run("expiry", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			lock := e.hl.NewLock(key, hashlock.WithoutKeepalive(), fast)
			h := mustAcquire(t, e, lock)
			e.rdb.PExpire(e.ctx, key, time.Millisecond)
			expectLost(t, e, lock, h, 2*time.Second, "gone")
		})
		t.Run("renewals-failing", func(t *testing.T) {
			proxy, err := testserver.StartProxy(s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			e := newEnvAt(t, proxy.Addr, hashlock.WithCallTimeout(200*time.Millisecond))
			lock := e.hl.NewLock(newKey(), hashlock.WithoutKeepalive(), hashlock.WithLease(600*time.Millisecond))
			h := mustAcquire(t, e, lock)
			proxy.Pause()
			expectLost(t, e, lock, h, 3*time.Second, "no renewal succeeded within the lease")
		})
	})
}

// A KEEPALIVE lock that lost its tie (as after a failover or a restart,
// simulated here by an untying LOCK.RENEW from another connection) is tied
// again by the check, not left to lapse a lease later.
func TestKeepaliveLockThatLostItsTieIsTiedAgain(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		lock := e.hl.NewLock(key, fast, hashlock.WithLease(5*time.Second))
		h := mustAcquire(t, e, lock)
		if err := e.rdb.Do(e.ctx, "LOCK.RENEW", key, lock.Owner(), "PX", 5000).Err(); err != nil {
			t.Fatal(err)
		}
		if i := e.info(key); i["keepalive"] != int64(0) {
			t.Fatalf("not untied: %v", i)
		}
		eventually(t, "the lock to be tied again", func() bool { return e.info(key)["keepalive"] == int64(1) })
		if h.Err() != nil {
			t.Fatal(h.Err())
		}
		// Tied to the Lock's connection: killing it releases the lock.
		if err := e.rdb.ClientKillByFilter(e.ctx, "ID", itoa(hashlock.ConnID(h))).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the server to release it", func() bool { return e.info(key) == nil })
		expectLost(t, e, lock, h, time.Second, "connection closed")
	})
}

func mustAcquire(t *testing.T, e *env, lock *hashlock.Lock) *hashlock.Hold {
	t.Helper()
	h, err := lock.Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newEnvAt is newEnv for a server reached at addr (a proxy).
func newEnvAt(t *testing.T, addr string, opts ...hashlock.ClientOption) *env {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	hl := hashlock.New(rdb, opts...)
	t.Cleanup(func() {
		hl.Close()
		rdb.Close()
	})
	return &env{t: t, rdb: rdb, hl: hl, ctx: context.Background()}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
