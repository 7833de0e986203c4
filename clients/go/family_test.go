package hashlock_test

// Semaphore, Lease, Latch, ReadWriteLock and MultiLock against the real
// servers (Redis 7.0 and Valkey 9.1 with the module).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"hashlock"
	"hashlock/internal/testserver"
)

// queued is the number of clients queued on key (LOCK.WAITERS works for every primitive).
func (e *env) queued(key string) int {
	v, err := e.rdb.Do(e.ctx, "LOCK.WAITERS", key).Slice()
	if err != nil {
		e.t.Fatalf("LOCK.WAITERS %s: %v", key, err)
	}
	return len(v)
}

func (e *env) semInfo(key string) map[string]int64 {
	v, err := e.rdb.Do(e.ctx, "SEMAPHORE.INFO", key).Result()
	out := map[string]int64{}
	if err != nil {
		return out
	}
	switch x := v.(type) {
	case map[interface{}]interface{}:
		for k, val := range x {
			n, _ := val.(int64)
			out[fmt.Sprint(k)] = n
		}
	case []interface{}:
		for i := 0; i+1 < len(x); i += 2 {
			n, _ := x[i+1].(int64)
			out[fmt.Sprint(x[i])] = n
		}
	}
	return out
}

func TestSemaphoreQueuesFirstComeFirstServed(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		sem := e.hl.NewSemaphore(key)
		if n, err := sem.Available(e.ctx); err != nil || n != 0 {
			t.Fatalf("available %d %v", n, err)
		}
		if err := sem.TryAcquire(e.ctx, 1); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("a missing semaphore has no permits: %v", err)
		}
		if ok, err := sem.Create(e.ctx, 4); !ok || err != nil {
			t.Fatalf("create %v %v", ok, err)
		}
		if ok, _ := sem.Create(e.ctx, 100); ok {
			t.Fatal("created twice")
		}
		if v := e.rdb.Get(e.ctx, key).Val(); v != "4" {
			t.Fatalf("Redisson's layout: GET %q", v)
		}
		must(t, sem.TryAcquire(e.ctx, 3))
		if err := sem.AcquireTimeout(e.ctx, 2, 50*time.Millisecond); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("BLOCK ran out: %v", err)
		}
		three := make(chan time.Time, 1)
		go func() {
			if err := sem.Acquire(e.ctx, 3); err == nil {
				three <- time.Now()
			}
		}()
		eventually(t, "the head queued", func() bool { return e.queued(key) == 1 })
		one := make(chan time.Time, 1)
		go func() {
			if err := sem.AcquireTimeout(e.ctx, 1, 10*time.Second); err == nil {
				one <- time.Now()
			}
		}()
		eventually(t, "the second queued", func() bool { return e.queued(key) == 2 })
		if err := sem.TryAcquire(e.ctx, 1); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("jumped the queue: %v", err)
		}
		if n, _ := sem.Release(e.ctx, 1); n != 2 {
			t.Fatalf("available %d, want 2 (the head wants 3)", n)
		}
		if n, _ := sem.Release(e.ctx, 1); n != 0 {
			t.Fatalf("available %d, want 0", n)
		}
		t3 := <-three
		if n, _ := sem.Release(e.ctx, 1); n != 0 {
			t.Fatalf("available %d, want 0", n)
		}
		if t1 := <-one; t1.Before(t3) {
			t.Fatal("the later waiter went first")
		}
		if n, _ := sem.Add(e.ctx, 5); n != 5 {
			t.Fatalf("add: %d", n)
		}
		if n, _ := sem.Drain(e.ctx); n != 5 {
			t.Fatalf("drain: %d", n)
		}
		// Typed errors.
		bad := newKey()
		e.rdb.Set(e.ctx, bad, "hello", 0)
		if err := e.hl.NewSemaphore(bad).TryAcquire(e.ctx, 1); !errors.Is(err, hashlock.ErrNotSemaphore) {
			t.Fatalf("%v, want ErrNotSemaphore", err)
		}
		if _, err := e.hl.NewLatch(bad).CountDown(e.ctx); !errors.Is(err, hashlock.ErrNotLatch) {
			t.Fatalf("%v, want ErrNotLatch", err)
		}
	})
}

func TestLeases(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		sem := e.hl.NewSemaphore(key, append(mode, hashlock.WithLease(600*time.Millisecond), hashlock.WithCheckInterval(30*time.Second))...)
		sem.Create(e.ctx, 3)
		lease, err := sem.Lease(e.ctx, 2)
		must(t, err)
		if len(lease.IDs()) != 2 || len(lease.IDs()[0]) != 32 {
			t.Fatalf("ids %v", lease.IDs())
		}
		i := e.semInfo(key)
		keepalive := int64(2)
		if mode != nil {
			keepalive = 0
		}
		if i["available"] != 1 || i["leased"] != 2 || i["keepalive"] != keepalive {
			t.Fatalf("info %v", i)
		}
		if n := e.rdb.ZCard(e.ctx, "{"+key+"}:timeout").Val(); n != 2 {
			t.Fatalf("Redisson's layout: %d ids in {key}:timeout", n)
		}
		time.Sleep(1500 * time.Millisecond) // 2.5 leases: the server (KEEPALIVE) or the watchdog keeps them
		if i := e.semInfo(key); i["leased"] != 2 || lease.Err() != nil {
			t.Fatalf("after 2.5 leases: %v %v", i, lease.Err())
		}
		if _, err := sem.TryLease(e.ctx, 2); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("%v", err)
		}
		got := make(chan *hashlock.Lease, 1)
		go func() {
			l, err := sem.LeaseTimeout(e.ctx, 2, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		eventually(t, "queued", func() bool { return e.queued(key) == 1 })
		must(t, lease.Release(e.ctx))
		if !errors.Is(lease.Release(e.ctx), hashlock.ErrReleased) || lease.Err() != hashlock.ErrReleased {
			t.Fatal("a second release")
		}
		l2 := <-got
		if l2 == nil {
			t.FailNow()
		}
		// Someone else returns an id (a Redisson client's release(id)): lost, seen by the events.
		must(t, e.rdb.Do(e.ctx, "SEMAPHORE.RETURN", key, l2.IDs()[0]).Err())
		if !closedWithin(l2.Done(), 2*time.Second) || !errors.Is(l2.Err(), hashlock.ErrLockLost) {
			t.Fatalf("the lease did not learn of its returned id: %v", l2.Err())
		}
		if err := l2.Release(e.ctx); !errors.Is(err, hashlock.ErrLockLost) {
			t.Fatalf("%v", err)
		}
		eventually(t, "every permit back", func() bool { i := e.semInfo(key); return i["available"] == 3 && i["leased"] == 0 })
	})
}

func TestLeaseKilledConnectionReturnsPermits(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		sem := e.hl.NewSemaphore(key)
		sem.Create(e.ctx, 1)
		l, err := sem.TryLease(e.ctx, 1)
		must(t, err)
		must(t, e.rdb.Do(e.ctx, "CLIENT", "KILL", "ID", hashlock.LeaseConnID(l)).Err())
		if !closedWithin(l.Done(), 2*time.Second) || !errors.Is(l.Err(), hashlock.ErrLockLost) {
			t.Fatalf("%v", l.Err())
		}
		eventually(t, "the permit back", func() bool { return e.semInfo(key)["available"] == 1 })
	})
}

func TestLatch(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		l := e.hl.NewLatch(key)
		if ok, err := l.WaitTimeout(e.ctx, 0); !ok || err != nil {
			t.Fatalf("a missing latch is open: %v %v", ok, err)
		}
		ok, err := l.Create(e.ctx, 2)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, _ := l.WaitTimeout(e.ctx, 50*time.Millisecond); ok {
			t.Fatal("open")
		}
		done := make(chan error, 3)
		for i := 0; i < 3; i++ {
			go func() { done <- l.Wait(e.ctx) }()
		}
		// A cancelled wait leaves the queue.
		ctx, cancel := context.WithCancel(e.ctx)
		cancelled := make(chan error, 1)
		go func() { cancelled <- l.Wait(ctx) }()
		eventually(t, "4 queued", func() bool { return e.queued(key) == 4 })
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Fatalf("%v", err)
		}
		eventually(t, "3 queued", func() bool { return e.queued(key) == 3 })
		dctx, dcancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
		if err := l.Wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v", err)
		}
		dcancel()
		if n, _ := l.CountDown(e.ctx); n != 1 {
			t.Fatal(n)
		}
		if n, _ := l.Count(e.ctx); n != 1 {
			t.Fatal(n)
		}
		if n, _ := l.CountDown(e.ctx); n != 0 {
			t.Fatal(n)
		}
		for i := 0; i < 3; i++ {
			must(t, <-done)
		}
	})
}

func TestReadWriteLock(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		key := newKey()
		a, b, c := e.hl.NewReadWriteLock(key, mode...), e.hl.NewReadWriteLock(key, mode...), e.hl.NewReadWriteLock(key, mode...)
		r1, err := a.TryRead(e.ctx)
		must(t, err)
		r2, err := a.TryRead(e.ctx)
		must(t, err)
		rb, err := b.TryRead(e.ctx)
		must(t, err)
		if v := e.rdb.HGet(e.ctx, key, a.Owner()).Val(); v != "2" || e.rdb.HGet(e.ctx, key, "mode").Val() != "read" {
			t.Fatalf("Redisson's layout: %v", e.rdb.HGetAll(e.ctx, key).Val())
		}
		if _, err := a.TryWrite(e.ctx); !errors.Is(err, hashlock.ErrNoUpgrade) {
			t.Fatalf("%v, want ErrNoUpgrade", err)
		}
		if r, w := a.Holds(); r != 2 || w != 0 {
			t.Fatalf("holds %d %d", r, w)
		}
		// A queued writer: a later reader does not pass it.
		wrote := make(chan *hashlock.RWHold, 1)
		go func() {
			h, err := c.Write(e.ctx)
			if err != nil {
				t.Error(err)
			}
			wrote <- h
		}()
		eventually(t, "the writer queued", func() bool { return e.queued(key) == 1 })
		d := e.hl.NewReadWriteLock(key, mode...)
		if _, err := d.TryRead(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("a reader passed a queued writer: %v", err)
		}
		must(t, r1.Release(e.ctx))
		must(t, r2.Release(e.ctx))
		must(t, rb.Release(e.ctx))
		hw := <-wrote
		if hw == nil {
			t.FailNow()
		}
		if _, err := a.TryRead(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("a writer excludes readers: %v", err)
		}
		// Downgrade.
		hr, err := hw.Downgrade(e.ctx)
		must(t, err)
		if r, w := c.Holds(); r != 1 || w != 0 {
			t.Fatalf("after the downgrade %d %d", r, w)
		}
		ra, err := a.TryRead(e.ctx)
		must(t, err)
		must(t, ra.Release(e.ctx))
		// Forced off: the holder learns it from the events.
		ok, err := c.ForceRelease(e.ctx)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		if !closedWithin(hr.Done(), 2*time.Second) || !errors.Is(hr.Err(), hashlock.ErrLockLost) {
			t.Fatalf("%v", hr.Err())
		}
		if err := hr.Release(e.ctx); !errors.Is(err, hashlock.ErrLockLost) {
			t.Fatalf("%v", err)
		}
		if i, _ := c.Info(e.ctx); i != nil {
			t.Fatalf("info %+v", i)
		}
	})
}

func TestMultiLock(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		tag := newKey()
		ka, kb, kc := "{"+tag+"}:a", "{"+tag+"}:b", "{"+tag+"}:c"
		lb := e.hl.NewLock(kb)
		hb, err := lb.TryAcquire(e.ctx)
		must(t, err)
		ab := e.hl.NewMultiLock([]string{ka, kb}, mode...)
		if _, err := ab.TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("%v", err)
		}
		if e.info(ka) != nil {
			t.Fatal("a partial hold")
		}
		ac := e.hl.NewMultiLock([]string{ka, kc}, mode...)
		h1, err := ac.TryAcquire(e.ctx)
		must(t, err)
		h2, err := ac.TryAcquire(e.ctx)
		must(t, err)
		if e.owner(ka) != ac.Owner() || e.info(kc)["holds"] != int64(2) {
			t.Fatalf("each key an ordinary lock: %v %v", e.info(ka), e.info(kc))
		}
		got := make(chan *hashlock.MultiHold, 1)
		go func() {
			h, err := ab.Acquire(e.ctx)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		eventually(t, "queued on both", func() bool { return e.queued(ka) == 1 && e.queued(kb) == 1 })
		must(t, h1.Release(e.ctx))
		must(t, h2.Release(e.ctx))
		time.Sleep(50 * time.Millisecond)
		if len(got) != 0 {
			t.Fatal("granted while b is held")
		}
		if _, err := e.hl.NewLock(ka).TryAcquire(e.ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
			t.Fatalf("a newcomer passed the queued multi-key waiter: %v", err)
		}
		must(t, hb.Release(e.ctx))
		hab := <-got
		if hab == nil {
			t.FailNow()
		}
		// A key forced off: lost, and the other given back.
		must(t, e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", kb).Err())
		if !closedWithin(hab.Done(), 2*time.Second) || !errors.Is(hab.Err(), hashlock.ErrLockLost) {
			t.Fatalf("%v", hab.Err())
		}
		eventually(t, "a given back", func() bool { return e.info(ka) == nil })
		if err := hab.Release(e.ctx); !errors.Is(err, hashlock.ErrLockLost) {
			t.Fatalf("%v", err)
		}
	})
}

// familyRace: a holder releases and a waiter's wait is cancelled at the
// same moment, trials times; a cancelled waiter must be left holding
// nothing (checked as soon as its call returns), and the object must be
// back where it started.
func familyRace(t *testing.T, e *env, trials int, queueKey string,
	hold func() (release func() error),
	wait func(ctx context.Context) (release func() error, err error),
	waiterHolds func() string, settled func() string) {
	t.Helper()
	var granted, cancelled int
	for i := 0; i < trials; i++ {
		release := hold()
		ctx, cancel := context.WithCancel(e.ctx)
		type result struct {
			release func() error
			err     error
			left    string
		}
		got := make(chan result, 1)
		go func() {
			r, err := wait(ctx)
			left := ""
			if err != nil {
				left = waiterHolds()
			}
			got <- result{r, err, left}
		}()
		eventually(t, "queued", func() bool { return e.queued(queueKey) == 1 })
		released := make(chan error, 1)
		go func() { released <- release() }()
		time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
		cancel()
		must(t, <-released)
		r := <-got
		if r.err == nil {
			granted++
			must(t, r.release())
		} else {
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("trial %d: %v", i, r.err)
			}
			cancelled++
			if r.left != "" {
				t.Fatalf("trial %d: the cancelled waiter holds %s", i, r.left)
			}
		}
		eventually(t, "settled", func() bool { return settled() == "" })
	}
	t.Logf("%d trials: %d granted before the cancel, %d cancelled, none left holding", trials, granted, cancelled)
	if cancelled == 0 {
		t.Fatal("no trial cancelled the wait: the race was not exercised")
	}
}

func TestFamilyCancelRacingARelease(t *testing.T) {
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		e := newEnv(t, s)
		t.Run("semaphore acquire", func(t *testing.T) {
			if mode != nil {
				t.Skip("anonymous permits have no lease mode")
			}
			key := newKey()
			sem := e.hl.NewSemaphore(key)
			sem.Create(e.ctx, 1)
			released := make(chan struct{}, 1)
			familyRace(t, e, 40, key,
				func() func() error {
					for len(released) > 0 {
						<-released
					}
					must(t, sem.TryAcquire(e.ctx, 1))
					return func() error {
						_, err := sem.Release(e.ctx, 1)
						released <- struct{}{}
						return err
					}
				},
				func(ctx context.Context) (func() error, error) {
					err := sem.Acquire(ctx, 1)
					return func() error { _, err := sem.Release(e.ctx, 1); return err }, err
				},
				func() string {
					// No owner: once the holder's release landed, a kept permit shows as a count of 0.
					select {
					case <-released:
						released <- struct{}{}
					case <-time.After(5 * time.Second):
						return "(the holder's release did not land)"
					}
					if n := e.semInfo(key)["available"]; n != 1 {
						return fmt.Sprintf("the count is %d, not 1", n)
					}
					return ""
				},
				func() string {
					if n := e.semInfo(key)["available"]; n != 1 {
						return fmt.Sprint(n)
					}
					return ""
				})
		})
		t.Run("semaphore lease", func(t *testing.T) {
			key := newKey()
			sem := e.hl.NewSemaphore(key, mode...)
			sem.Create(e.ctx, 1)
			var held *hashlock.Lease
			familyRace(t, e, 40, key,
				func() func() error {
					l, err := sem.TryLease(e.ctx, 1)
					must(t, err)
					held = l
					return func() error { return l.Release(e.ctx) }
				},
				func(ctx context.Context) (func() error, error) {
					l, err := sem.Lease(ctx, 1)
					if err != nil {
						return nil, err
					}
					return func() error { return l.Release(e.ctx) }, nil
				},
				func() string {
					ids := e.rdb.ZRange(e.ctx, "{"+key+"}:timeout", 0, -1).Val()
					for _, id := range ids {
						if fmt.Sprintf("%x", id) != held.IDs()[0] {
							return fmt.Sprintf("permit %x (holder %v, all %q, info %v)", id, held.IDs(), ids, e.semInfo(key))
						}
					}
					return ""
				},
				func() string {
					if i := e.semInfo(key); i["available"] != 1 || i["leased"] != 0 {
						return fmt.Sprint(i)
					}
					return ""
				})
		})
		t.Run("rwlock", func(t *testing.T) {
			key := newKey()
			holder, waiter := e.hl.NewReadWriteLock(key, mode...), e.hl.NewReadWriteLock(key, mode...)
			familyRace(t, e, 40, key,
				func() func() error {
					h, err := holder.TryRead(e.ctx)
					must(t, err)
					return func() error { return h.Release(e.ctx) }
				},
				func(ctx context.Context) (func() error, error) {
					h, err := waiter.Write(ctx)
					if err != nil {
						return nil, err
					}
					return func() error { return h.Release(e.ctx) }, nil
				},
				func() string {
					if w := e.rdb.HGet(e.ctx, key, waiter.Owner()+":write").Val(); w != "" {
						return "write " + w
					}
					return ""
				},
				func() string {
					if n := e.rdb.Exists(e.ctx, key).Val(); n != 0 {
						return fmt.Sprint(e.rdb.HGetAll(e.ctx, key).Val())
					}
					return ""
				})
		})
		t.Run("multilock", func(t *testing.T) {
			tag := newKey()
			ka, kb := "{"+tag+"}:a", "{"+tag+"}:b"
			holder, waiter := e.hl.NewMultiLock([]string{ka, kb}, mode...), e.hl.NewMultiLock([]string{kb, ka}, mode...)
			familyRace(t, e, 40, ka,
				func() func() error {
					h, err := holder.TryAcquire(e.ctx)
					must(t, err)
					return func() error { return h.Release(e.ctx) }
				},
				func(ctx context.Context) (func() error, error) {
					h, err := waiter.Acquire(ctx)
					if err != nil {
						return nil, err
					}
					return func() error { return h.Release(e.ctx) }, nil
				},
				func() string {
					for _, k := range []string{ka, kb} {
						if e.owner(k) == waiter.Owner() {
							return k
						}
					}
					return ""
				},
				func() string {
					if e.info(ka) != nil || e.info(kb) != nil {
						return "held"
					}
					return ""
				})
		})
	})
}

// TestSemaphoreTimeoutRacingARelease: a wait whose BLOCK runs out in the
// instant of a release: granted or not, no permit is lost or kept by a
// waiter that was told no.
func TestSemaphoreTimeoutRacingARelease(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		granted, timedOut := 0, 0
		for i := 0; i < 40; i++ {
			key := newKey()
			sem := e.hl.NewSemaphore(key)
			sem.Create(e.ctx, 1)
			must(t, sem.TryAcquire(e.ctx, 1))
			lease := i%2 == 1
			got := make(chan error, 1)
			go func() {
				if !lease {
					got <- sem.AcquireTimeout(e.ctx, 1, 30*time.Millisecond)
					return
				}
				l, err := sem.LeaseTimeout(e.ctx, 1, 30*time.Millisecond)
				if err == nil {
					err = l.Release(e.ctx)
				}
				got <- err
			}()
			eventually(t, "queued", func() bool { return e.queued(key) == 1 || len(got) > 0 })
			time.Sleep(time.Duration(25+i%10) * time.Millisecond)
			_, err := sem.Release(e.ctx, 1)
			must(t, err)
			switch err := <-got; {
			case err == nil:
				granted++
				if !lease {
					_, err := sem.Release(e.ctx, 1)
					must(t, err)
				}
			case errors.Is(err, hashlock.ErrNotAcquired):
				timedOut++
			default:
				t.Fatal(err)
			}
			eventually(t, "the permit back", func() bool { i := e.semInfo(key); return i["available"] == 1 && i["leased"] == 0 })
		}
		t.Logf("BLOCK ran out around a release 40 times: %d granted, %d timed out, no permit lost", granted, timedOut)
	})
}
