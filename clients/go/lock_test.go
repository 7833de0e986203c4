package hashlock_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

func TestAcquireReenterRelease(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		lock := e.hl.NewLock(key, append(mode, hashlock.WithLease(20*time.Second))...)
		if len(lock.Owner()) != 36 || lock.Owner() == e.hl.NewLock(key).Owner() {
			t.Fatalf("owner %q: want a UUID of its own", lock.Owner())
		}
		first, err := lock.TryAcquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		second, err := lock.TryAcquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lock.Holds() != 2 {
			t.Fatalf("holds %d, want 2", lock.Holds())
		}
		info, err := lock.Info(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		keepalive := mode == nil
		if info.Owner != lock.Owner() || info.Holds != 2 || info.Waiters != 0 || info.Keepalive != keepalive ||
			info.TTL <= 0 || info.TTL > 20*time.Second {
			t.Fatalf("info %+v", info)
		}
		// Redisson's layout: a hash {owner: count}.
		if h := e.rdb.HGetAll(e.ctx, key).Val(); len(h) != 1 || h[lock.Owner()] != "2" {
			t.Fatalf("HGETALL %v", h)
		}
		other := e.hl.NewLock(key, mode...)
		if _, err := other.TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("other TryAcquire: %v, want ErrNotAcquired", err)
		}
		if _, err := other.AcquireTimeout(e.ctx, 50*time.Millisecond); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("other AcquireTimeout: %v, want ErrNotAcquired", err)
		}
		if err := second.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		if lock.Holds() != 1 || first.Err() != nil || closedWithin(first.Done(), 0) {
			t.Fatalf("after one release: holds %d, err %v", lock.Holds(), first.Err())
		}
		if err := second.Release(e.ctx); !errors.Is(err, hashlock.ErrReleased) {
			t.Fatalf("second Release of one hold: %v, want ErrReleased", err)
		}
		if err := first.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(first.Done(), 0) || !errors.Is(first.Err(), hashlock.ErrReleased) || errors.Is(first.Err(), hashlock.ErrLockLost) {
			t.Fatalf("after the last release: Done not closed or Err %v", first.Err())
		}
		if info, err := lock.Info(e.ctx); err != nil || info != nil {
			t.Fatalf("info after release: %+v, %v", info, err)
		}
		// Acquire again after a full release: a new tenure.
		h, err := lock.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Err() != nil || lock.Holds() != 1 {
			t.Fatalf("reacquired: err %v holds %d", h.Err(), lock.Holds())
		}
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWaitHandsOff(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		a, b := e.hl.NewLock(key, mode...), e.hl.NewLock(key, mode...)
		ha, err := a.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		var hb *hashlock.Hold
		go func() {
			var err error
			hb, err = b.Acquire(e.ctx)
			got <- err
		}()
		eventually(t, "b queued", func() bool { return e.waiters(key) == 1 })
		if err := ha.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitFor):
			t.Fatal("b was not handed the lock")
		}
		if e.owner(key) != b.Owner() {
			t.Fatalf("owner %q, want b", e.owner(key))
		}
		if err := hb.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTimeoutsEndTheWaitOnTheServer(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		a, b := e.hl.NewLock(key), e.hl.NewLock(key)
		ha, err := a.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		dials := e.hl.Stats().Dials
		started := time.Now()
		_, err = b.AcquireTimeout(e.ctx, 300*time.Millisecond)
		if !errors.Is(err, hashlock.ErrNotAcquired) || time.Since(started) < 290*time.Millisecond {
			t.Fatalf("AcquireTimeout: %v after %v", err, time.Since(started))
		}
		ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
		defer cancel()
		_, err = b.Acquire(ctx)
		if !errors.Is(err, hashlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past the context's deadline: %v", err)
		}
		if n := e.waiters(key); n != 0 {
			t.Fatalf("waiters %d after the timeouts", n)
		}
		if err := ha.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		// At most the context-deadline wait may have had to close its
		// connection (if the client's deadline fired before the server's
		// answer); the server-side timeout's connection was reused.
		if d := e.hl.Stats().Dials - dials; d > 2 {
			t.Fatalf("%d new connections for two timed-out waits", d)
		}
	})
}

func TestCancelledWaitIsNeverGranted(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		a, b := e.hl.NewLock(key, mode...), e.hl.NewLock(key, mode...)
		ha, err := a.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		got := make(chan error, 1)
		go func() {
			_, err := b.Acquire(ctx)
			got <- err
		}()
		eventually(t, "b queued", func() bool { return e.waiters(key) == 1 })
		cancelled := time.Now()
		cancel()
		select {
		case err := <-got:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire: %v", err)
			}
			if d := time.Since(cancelled); d > time.Second {
				t.Fatalf("Acquire returned %v after the cancel", d)
			}
		case <-time.After(waitFor):
			t.Fatal("cancelled Acquire did not return")
		}
		eventually(t, "the waiter to leave the queue", func() bool { return e.waiters(key) == 0 })
		if err := ha.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if i := e.info(key); i != nil {
			t.Fatalf("the lock went to someone after the cancelled wait: %v", i)
		}
		// The Lock is usable again.
		hb, err := b.TryAcquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := hb.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A grant already on its way to a waiter whose context is cancelled at
// that moment must be given back at once: the holder's release and the
// cancellation race, many times.
func TestCancelRacingAReleaseGivesTheGrantBack(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		cancelRace(t, e, 60, mode)
	})
}

// cancelRace: a holds the lock, b waits for it; a's release and the
// cancellation of b's wait happen together, trials times. b must never be
// left holding the lock.
func cancelRace(t *testing.T, e *env, trials int, mode []hashlock.LockOption) {
	t.Helper()
	key := newKey()
	a, b := e.hl.NewLock(key, mode...), e.hl.NewLock(key, mode...)
	var granted, cancelled, stuck int
	for i := 0; i < trials; i++ {
		ha, err := a.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		type result struct {
			h   *hashlock.Hold
			err error
		}
		got := make(chan result, 1)
		go func() {
			h, err := b.Acquire(ctx)
			got <- result{h, err}
		}()
		eventually(t, "b queued", func() bool { return e.waiters(key) == 1 })
		released := make(chan error, 1)
		go func() { released <- ha.Release(e.ctx) }()
		// Spread the cancel around the release: before, with, after.
		time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
		cancel()
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err == nil {
			granted++ // the grant arrived before the cancel: b holds it
			if err := r.h.Release(e.ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("trial %d: %v", i, r.err)
		}
		cancelled++
		// Given back at once: free again within a short time, not after
		// b's 30 s lease.
		deadline := time.Now().Add(time.Second)
		for e.info(key) != nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if owner := e.owner(key); owner != "" {
			stuck++
			t.Errorf("trial %d: the lock is still held by %s 1 s after the cancelled wait", i, ownerName(owner, a, b))
			e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
		}
	}
	t.Logf("%d trials: %d granted before the cancel, %d cancelled, %d left held", trials, granted, cancelled, stuck)
	if cancelled == 0 {
		t.Fatal("no trial cancelled the wait: the race was not exercised")
	}
}

func ownerName(owner string, a, b *hashlock.Lock) string {
	switch owner {
	case a.Owner():
		return "the releasing holder"
	case b.Owner():
		return "the cancelled waiter"
	}
	return owner
}

func TestErrorsAreTyped(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		// Without events: the release itself must meet the server's NOTOWNER
		// (with them, the hold may learn of the loss first).
		lock := e.hl.NewLock(key, hashlock.WithoutKeepalive(), hashlock.WithoutEvents())
		h, err := lock.TryAcquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
		err = h.Release(e.ctx)
		var lost *hashlock.LostError
		var se *hashlock.ServerError
		var redisErr redis.Error
		if !errors.Is(err, hashlock.ErrLockLost) || !errors.Is(err, hashlock.ErrNotOwner) || !errors.As(err, &lost) ||
			!errors.As(err, &se) || se.Code != "NOTOWNER" || !errors.As(err, &redisErr) {
			t.Fatalf("release after FORCERELEASE: %v (%T)", err, err)
		}
		if err := lock.Renew(e.ctx); !errors.Is(err, hashlock.ErrLockLost) {
			t.Fatalf("Renew when not held: %v", err)
		}

		e.rdb.Set(e.ctx, key, "not a hash", 0)
		if _, err := lock.TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrWrongType) {
			t.Fatalf("acquire on a string: %v", err)
		}
		if _, err := lock.Info(e.ctx); !errors.Is(err, hashlock.ErrWrongType) {
			t.Fatalf("info on a string: %v", err)
		}
		e.rdb.Del(e.ctx, key)

		e.rdb.HSet(e.ctx, key, "a", "1", "b", "1")
		for name, f := range map[string]func() error{
			"TryAcquire":     func() error { _, err := lock.TryAcquire(e.ctx); return err },
			"AcquireTimeout": func() error { _, err := lock.AcquireTimeout(e.ctx, time.Second); return err },
			"keepalive":      func() error { _, err := e.hl.NewLock(key).TryAcquire(e.ctx); return err },
		} {
			if err := f(); !errors.Is(err, hashlock.ErrNotLock) || !errors.As(err, &se) || !strings.HasPrefix(se.Reply, "NOTLOCK") {
				t.Fatalf("%s on a hash that is not a lock: %v", name, err)
			}
		}
		if h := e.rdb.HGetAll(e.ctx, key).Val(); len(h) != 2 {
			t.Fatalf("the hash was changed: %v", h)
		}
		e.rdb.Del(e.ctx, key)

		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": s.Addr}})
		defer ring.Close()
		if _, err := hashlock.New(ring).NewLock(key).TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrUnsupportedClient) {
			t.Fatalf("a Ring client: %v", err)
		}
		closed := hashlock.New(e.rdb)
		closed.Close()
		if _, err := closed.NewLock(key).TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrClosed) {
			t.Fatalf("a closed Client: %v", err)
		}

		noReplica := e.hl.NewLock(key, hashlock.WithReplicas(1, 200*time.Millisecond))
		if _, err := noReplica.TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrNoReplicas) {
			t.Fatalf("REPLICAS 1 without replicas: %v", err)
		}
		if i := e.info(key); i != nil {
			t.Fatalf("a NOREPLICAS grant was kept: %v", i)
		}
	})
}

func TestModuleNotLoaded(t *testing.T) {
	for _, kind := range testserver.Kinds {
		t.Run(kind, func(t *testing.T) {
			s, err := testserver.Start(kind, testserver.Options{NoModule: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			e := newEnv(t, s)
			_, err = e.hl.NewLock(newKey()).Acquire(e.ctx)
			if !errors.Is(err, hashlock.ErrModuleNotLoaded) || !strings.Contains(err.Error(), "the hashlock module is not loaded") {
				t.Fatalf("acquire without the module: %v", err)
			}
			t.Log(err)
		})
	}
}

func TestKeepaliveKilledHolderHandsOnAtOnce(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		holder := exec.Command(os.Args[0], "-test.run=^$")
		holder.Env = append(os.Environ(), "HASHLOCK_TEST_HOLDER="+s.Addr+" "+key)
		out, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}()
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "held\n" {
			t.Fatalf("holder said %q", line)
		}
		if i := e.info(key); i["keepalive"] != int64(1) || i["ttl"].(int64) < 20000 {
			t.Fatalf("holder's lock: %v", i)
		}
		waiter := e.hl.NewLock(key)
		got := make(chan error, 1)
		var h *hashlock.Hold
		go func() {
			var err error
			h, err = waiter.AcquireTimeout(e.ctx, 25*time.Second)
			got <- err
		}()
		eventually(t, "the waiter queued", func() bool { return e.waiters(key) == 1 })
		killed := time.Now()
		_ = holder.Process.Kill() // SIGKILL: no release, no goodbye
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		handedOn := time.Since(killed)
		if handedOn > 5*time.Second {
			t.Fatalf("handed on after %v; the lease was 30 s", handedOn)
		}
		t.Logf("killed KEEPALIVE holder: handed on after %v", handedOn)
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKeepaliveOutlivesItsLeaseWithoutAWatchdog(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		lock := e.hl.NewLock(key, hashlock.WithLease(300*time.Millisecond), hashlock.WithCheckInterval(time.Hour))
		h, err := lock.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // three leases; no check runs: the server renews
		if e.owner(key) != lock.Owner() || h.Err() != nil {
			t.Fatalf("owner %q, err %v", e.owner(key), h.Err())
		}
		if err := lock.Renew(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWatchdogRenews(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		lock := e.hl.NewLock(key, hashlock.WithoutKeepalive(), hashlock.WithLease(300*time.Millisecond))
		h, err := lock.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1200 * time.Millisecond) // four leases
		if e.owner(key) != lock.Owner() || h.Err() != nil {
			t.Fatalf("owner %q, err %v", e.owner(key), h.Err())
		}
		if i := e.info(key); i["keepalive"] != int64(0) {
			t.Fatalf("a watchdog lock is tied: %v", i)
		}
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestToken(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		a := e.hl.NewLock(key, append(mode, hashlock.WithToken())...)
		h1, err := a.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := a.TryAcquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h1.Token() == 0 || h2.Token() <= h1.Token() {
			t.Fatalf("tokens %d then %d: want growing with every acquisition, re-entry included", h1.Token(), h2.Token())
		}
		info, err := a.Info(e.ctx)
		if err != nil || info.Token != h2.Token() {
			t.Fatalf("info token %+v, %v; want %d", info, err, h2.Token())
		}
		if v, _ := e.rdb.Get(e.ctx, "redisson_lock_token:{"+key+"}").Uint64(); v != h2.Token() {
			t.Fatalf("Redisson's counter %d, want %d", v, h2.Token())
		}
		b := e.hl.NewLock(key, append(mode, hashlock.WithToken())...)
		got := make(chan *hashlock.Hold, 1)
		go func() {
			h, err := b.Acquire(e.ctx)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		eventually(t, "b queued", func() bool { return e.waiters(key) == 1 })
		if err := h2.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := h1.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		hb := <-got
		if hb == nil || hb.Token() <= h2.Token() {
			t.Fatalf("b's token not above a's")
		}
		if err := hb.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A Release whose context is already cancelled still releases (in the
// background), and the Lock's next call waits for it.
func TestReleaseRunsToItsEndUnderCancellation(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		lock := e.hl.NewLock(key, mode...)
		h, err := lock.Acquire(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		err = h.Release(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Release with a cancelled context: %v", err)
		}
		eventually(t, "the release to finish", func() bool { return e.info(key) == nil })
		if !closedWithin(h.Done(), time.Second) || !errors.Is(h.Err(), hashlock.ErrReleased) {
			t.Fatalf("after the background release: %v", h.Err())
		}
		h2, err := lock.TryAcquire(e.ctx)
		if err != nil || lock.Holds() != 1 {
			t.Fatalf("TryAcquire after: %v, holds %d", err, lock.Holds())
		}
		if err := h2.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Redisson's own scripts (RedissonLock 3.x/4.x tryLockInnerAsync and
// unlockInnerAsync) on the same key.
const redissonTryLock = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);`
const redissonUnlock = `if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; return nil;`

func TestRedissonInterop(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		redisson := "6f0a9a3e-6c1b-4c57-9d0e-6d3f1c1f6e2a:1"
		tryLock := func() (interface{}, error) {
			return e.rdb.Eval(e.ctx, redissonTryLock, []string{key}, 30000, redisson).Result()
		}
		unlock := func() (interface{}, error) {
			return e.rdb.Eval(e.ctx, redissonUnlock, []string{key, "redisson_lock__channel:{" + key + "}"}, 0, 30000, redisson, "publish").Result()
		}
		if _, err := tryLock(); err != redis.Nil {
			t.Fatalf("Redisson tryLock: %v", err)
		}
		lock := e.hl.NewLock(key, mode...)
		if _, err := lock.TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire on Redisson's lock: %v", err)
		}
		got := make(chan *hashlock.Hold, 1)
		go func() {
			h, err := lock.Acquire(e.ctx)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		eventually(t, "queued", func() bool { return e.waiters(key) == 1 })
		if v, err := unlock(); err != nil || v != int64(1) {
			t.Fatalf("Redisson unlock: %v %v", v, err)
		}
		h := <-got // Redisson's unlock served the native waiter
		if h == nil {
			t.FailNow()
		}
		if hg := e.rdb.HGetAll(e.ctx, key).Val(); hg[lock.Owner()] != "1" {
			t.Fatalf("HGETALL %v", hg)
		}
		if v, err := tryLock(); err != nil || v.(int64) <= 0 {
			t.Fatalf("Redisson sees it held: %v %v", v, err)
		}
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
		// A Lock with Redisson's owner id re-enters Redisson's lock.
		if _, err := tryLock(); err != redis.Nil {
			t.Fatalf("Redisson tryLock: %v", err)
		}
		same := e.hl.NewLock(key, hashlock.WithOwner(redisson), hashlock.WithoutKeepalive())
		hs, err := same.TryAcquire(e.ctx)
		if err != nil || same.Holds() != 2 {
			t.Fatalf("re-entering Redisson's lock: %v, holds %d", err, same.Holds())
		}
		if v, err := unlock(); err != nil || v != int64(0) {
			t.Fatalf("Redisson unlock of one hold: %v %v", v, err)
		}
		if err := hs.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Keys and owners are binary-safe, as the commands are.
func TestBinarySafeNames(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey() + "\x00 é\r\n"
		lock := e.hl.NewLock(key, hashlock.WithOwner("owner\x00 ü\r\n"))
		h := mustAcquire(t, e, lock)
		info, err := lock.Info(e.ctx)
		if err != nil || info.Owner != "owner\x00 ü\r\n" || info.Holds != 1 {
			t.Fatalf("info %+v, %v", info, err)
		}
		if err := h.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}
