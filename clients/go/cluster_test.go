package hashlock_test

// Locks through a go-redis ClusterClient: routed by key, MOVED and ASK
// followed, a wait whose slot moves re-issued on the new node, a KEEPALIVE
// lock whose slot moves tied again there.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

var clusterConfig = testserver.Options{Config: []string{
	"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
	"--cluster-require-full-coverage", "no",
}}

// twoNodes: two primaries; src starts with every slot, a test moves its
// own key's slot to dst.
type twoNodes struct {
	src, dst     *testserver.Server
	s, d         *redis.Client
	srcID, dstID string
	ctx          context.Context
	t            *testing.T
}

func startTwoNodes(t *testing.T, kind string) *twoNodes {
	t.Helper()
	n := &twoNodes{ctx: context.Background(), t: t}
	var err error
	if n.src, err = testserver.Start(kind, clusterConfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.src.Stop)
	if n.dst, err = testserver.Start(kind, clusterConfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.dst.Stop)
	n.s, n.d = n.src.Client(), n.dst.Client()
	t.Cleanup(func() { n.s.Close(); n.d.Close() })
	must(t, n.s.Do(n.ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	must(t, n.s.ClusterMeet(n.ctx, "127.0.0.1", itoa(int64(n.dst.Port))).Err())
	n.srcID, n.dstID = n.s.Do(n.ctx, "CLUSTER", "MYID").Val().(string), n.d.Do(n.ctx, "CLUSTER", "MYID").Val().(string)
	deadline := time.Now().Add(20 * time.Second)
	for !(clusterOK(n.s) && clusterOK(n.d) && strings.Count(n.d.ClusterNodes(n.ctx).Val(), "\n") == 2 &&
		strings.Count(n.s.ClusterNodes(n.ctx).Val(), "\n") == 2) {
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not form")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

func clusterOK(c *redis.Client) bool {
	return strings.Contains(c.ClusterInfo(context.Background()).Val(), "cluster_state:ok")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (n *twoNodes) slot(key string) int64 { return n.s.ClusterKeySlot(n.ctx, key).Val() }

func (n *twoNodes) startMigration(key string) {
	slot := n.slot(key)
	must(n.t, n.d.Do(n.ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", n.srcID).Err())
	must(n.t, n.s.Do(n.ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", n.dstID).Err())
}

func (n *twoNodes) finishMigration(key string) {
	slot := n.slot(key)
	must(n.t, n.d.Do(n.ctx, "CLUSTER", "SETSLOT", slot, "NODE", n.dstID).Err())
	must(n.t, n.s.Do(n.ctx, "CLUSTER", "SETSLOT", slot, "NODE", n.dstID).Err())
}

// move migrates key (with its lock) from src to dst.
func (n *twoNodes) move(key string) {
	n.startMigration(key)
	must(n.t, n.s.Do(n.ctx, "MIGRATE", "127.0.0.1", n.dst.Port, "", 0, 5000, "KEYS", key).Err())
	n.finishMigration(key)
}

func (n *twoNodes) cluster() (*redis.ClusterClient, *hashlock.Client) {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{n.src.Addr}})
	hl := hashlock.New(rc)
	n.t.Cleanup(func() { hl.Close(); rc.Close() })
	return rc, hl
}

func waitersOn(c *redis.Client, key string) int64 {
	i, _ := lockInfo(c, key)
	n, _ := i["waiters"].(int64)
	return n
}

func ownerOn(c *redis.Client, key string) (owner string, keepalive int64) {
	i, _ := lockInfo(c, key)
	owner, _ = i["owner"].(string)
	keepalive, _ = i["keepalive"].(int64)
	return owner, keepalive
}

func TestCluster(t *testing.T) {
	for _, kind := range testserver.Kinds {
		t.Run(kind, func(t *testing.T) {
			n := startTwoNodes(t, kind)
			t.Run("lock-and-wait", func(t *testing.T) {
				for _, mode := range [][]hashlock.LockOption{nil, {hashlock.WithoutKeepalive()}} {
					_, hl := n.cluster()
					key := "{user:" + newKey() + "}:lock"
					a, b := hl.NewLock(key, mode...), hl.NewLock(key, mode...)
					ha := mustAcquireCtx(t, a)
					ha2, err := a.TryAcquire(n.ctx)
					must(t, err)
					got := make(chan error, 1)
					var hb *hashlock.Hold
					go func() {
						var err error
						hb, err = b.AcquireTimeout(n.ctx, waitFor)
						got <- err
					}()
					eventually(t, "b queued", func() bool { return waitersOn(n.s, key) == 1 })
					must(t, ha2.Release(n.ctx))
					must(t, ha.Release(n.ctx))
					must(t, <-got)
					if owner, _ := ownerOn(n.s, key); owner != b.Owner() {
						t.Fatalf("owner %q, want b", owner)
					}
					must(t, hb.Release(n.ctx))
				}
			})
			t.Run("ask-and-moved", func(t *testing.T) {
				// The client's slot map says src; the library follows the
				// server's ASK (slot migrating) and MOVED (slot moved).
				_, hl := n.cluster()
				asked := hl.NewLock("ask:"+newKey(), hashlock.WithoutKeepalive())
				n.startMigration(asked.Name())
				h, err := asked.AcquireTimeout(n.ctx, waitFor) // src: ASK (no such key here) -> dst with ASKING
				must(t, err)
				slot := n.slot(asked.Name())
				if c := n.d.ClusterCountKeysInSlot(n.ctx, int(slot)).Val(); c != 1 {
					t.Fatalf("keys on dst: %d", c)
				}
				n.finishMigration(asked.Name())
				must(t, h.Release(n.ctx))

				moved := hl.NewLock("moved:" + newKey())
				n.move(moved.Name())
				h, err = moved.Acquire(n.ctx) // src: MOVED -> dst
				must(t, err)
				if owner, keepalive := ownerOn(n.d, moved.Name()); owner != moved.Owner() || keepalive != 1 {
					t.Fatalf("on dst: owner %q keepalive %d", owner, keepalive)
				}
				must(t, h.Release(n.ctx))
			})
			t.Run("wait-follows-its-slot", func(t *testing.T) {
				// The module answers a waiter MOVED when its key's slot
				// moves; the library re-issues the wait on the new node,
				// where the lock arrived with its holder.
				_, hl := n.cluster()
				key := newKey()
				holder := hl.NewLock(key, hashlock.WithoutKeepalive())
				waiter := hl.NewLock(key)
				hh := mustAcquireCtx(t, holder)
				got := make(chan error, 1)
				var hw *hashlock.Hold
				go func() {
					var err error
					hw, err = waiter.AcquireTimeout(n.ctx, 2*waitFor)
					got <- err
				}()
				eventually(t, "queued on src", func() bool { return waitersOn(n.s, key) == 1 })
				n.move(key)
				eventually(t, "the wait re-issued on dst", func() bool { return waitersOn(n.d, key) == 1 })
				must(t, hh.Release(n.ctx))
				must(t, <-got)
				if owner, keepalive := ownerOn(n.d, key); owner != waiter.Owner() || keepalive != 1 {
					t.Fatalf("on dst: owner %q keepalive %d", owner, keepalive)
				}
				must(t, hw.Release(n.ctx))
			})
			t.Run("keepalive-lock-follows-its-slot", func(t *testing.T) {
				// A KEEPALIVE lock arrives untied on the new node; the
				// check finds it there (MOVED) and ties it to a connection
				// to the new node, instead of letting it lapse a lease
				// later unnoticed.
				_, hl := n.cluster()
				key := newKey()
				lock := hl.NewLock(key, fast, hashlock.WithLease(5*time.Second))
				h := mustAcquireCtx(t, lock)
				n.move(key)
				eventually(t, "the lock tied on dst", func() bool {
					owner, keepalive := ownerOn(n.d, key)
					return owner == lock.Owner() && keepalive == 1 && hashlock.ConnAddr(h) == n.dst.Addr
				})
				if h.Err() != nil {
					t.Fatal(h.Err())
				}
				// Its connection is the dst one now: killing it releases
				// the lock there and fires the loss signal.
				must(t, n.d.ClientKillByFilter(n.ctx, "ID", itoa(hashlock.ConnID(h))).Err())
				if !closedWithin(h.Done(), time.Second) || !errors.Is(h.Err(), hashlock.ErrLockLost) {
					t.Fatalf("loss signal after the kill on dst: %v", h.Err())
				}
				eventually(t, "dst to release it", func() bool { o, _ := ownerOn(n.d, key); return o == "" })
			})
		})
	}
}

func mustAcquireCtx(t *testing.T, lock *hashlock.Lock) *hashlock.Hold {
	t.Helper()
	h, err := lock.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// An election on a key whose slot moved after the cluster client loaded
// its slot map: Observe and the terms' events follow the key to the node
// that serves it (the server's MOVED, not the stale map), and a term whose
// slot moves while it lasts is still revoked as it happens there.
func TestClusterElection(t *testing.T) {
	for _, kind := range testserver.Kinds {
		t.Run(kind, func(t *testing.T) {
			n := startTwoNodes(t, kind)
			for _, c := range []*redis.Client{n.s, n.d} {
				must(t, c.ConfigSet(n.ctx, "notify-keyspace-events", "Kd").Err())
			}
			rc, hl := n.cluster()
			must(t, rc.Ping(n.ctx).Err()) // the slot map: every slot on src
			key := "{election:" + newKey() + "}"
			n.move(key) // the (empty) slot moves to dst: the map is stale now
			e := &env{t: t, rdb: n.d, hl: hl, ctx: n.ctx}
			a := hl.NewElection(key, hashlock.WithCandidateID("node-a"))
			o := observe(t, e, hl.NewElection(key))
			o.expect(hashlock.NoLeader, "")
			la, err := a.Campaign(n.ctx)
			must(t, err)
			if owner, _ := ownerOn(n.d, key); owner != "node-a" {
				t.Fatalf("owner on dst %q", owner)
			}
			o.expect(hashlock.NewLeader, "node-a")
			// Forced off on dst: the term learns it from dst's events.
			must(t, n.d.Do(n.ctx, "LOCK.FORCERELEASE", key).Err())
			if !closedWithin(la.Done(), time.Second) {
				t.Fatal("the term was not revoked within 1 s")
			}
			o.expect(hashlock.NoLeader, "")
		})
	}
}

// TestClusterFamily: the family through a ClusterClient (keys on both
// nodes); keys, or derived keys, in different slots are refused with
// ErrCrossSlot and nothing changes.
func TestClusterFamily(t *testing.T) {
	for _, kind := range testserver.Kinds {
		t.Run(kind, func(t *testing.T) {
			n := startTwoNodes(t, kind)
			_, hl := n.cluster()
			tag := newKey()
			n.move("{" + tag + "}") // the tag's slot on dst: the client follows MOVED
			m := hl.NewMultiLock([]string{"{" + tag + "}:stock", "{" + tag + "}:payment"})
			h, err := m.TryAcquire(n.ctx)
			must(t, err)
			must(t, h.Release(n.ctx))
			apart := hl.NewMultiLock([]string{tag + ":stock", tag + ":payment"})
			if _, err := apart.TryAcquire(n.ctx); !errors.Is(err, hashlock.ErrCrossSlot) {
				t.Fatalf("%v, want ErrCrossSlot", err)
			}
			// A name with a lone '{': its {name}:timeout lands in another slot.
			odd := hl.NewSemaphore("a{b" + tag)
			if _, err := odd.Add(n.ctx, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := odd.TryLease(n.ctx, 1); !errors.Is(err, hashlock.ErrCrossSlot) {
				t.Fatalf("%v, want ErrCrossSlot", err)
			}
			if v, _ := odd.Available(n.ctx); v != 2 {
				t.Fatalf("available %d: something changed", v)
			}
			sem := hl.NewSemaphore("{" + tag + "}:sem")
			sem.Create(n.ctx, 1)
			l, err := sem.LeaseTimeout(n.ctx, 1, time.Second)
			must(t, err)
			must(t, l.Release(n.ctx))
			rw := hl.NewReadWriteLock("{" + tag + "}:rw")
			w, err := rw.Write(n.ctx)
			must(t, err)
			r, err := w.Downgrade(n.ctx)
			must(t, err)
			must(t, r.Release(n.ctx))
			latch := hl.NewLatch("{" + tag + "}:latch")
			latch.Create(n.ctx, 1)
			done := make(chan error, 1)
			go func() { done <- latch.Wait(n.ctx) }()
			time.Sleep(50 * time.Millisecond)
			_, err = latch.CountDown(n.ctx)
			must(t, err)
			must(t, <-done)
		})
	}
}
