package hashlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"hashlock/internal/wire"
)

// MultiLock is a lock of several keys taken all at once or not at all
// (LOCK.MACQUIRE / LOCK.MRELEASE). Each key is an ordinary lock (Lock,
// Redisson's RLock), so a RedissonMultiLock over the same names sees the
// holds. A waiter queues on every key in one arrival order and is granted
// when it heads the queue of each and all are free: never a partial hold,
// never a deadlock ({a, b} and {b, a} are served in turn). One MultiLock is
// one owner, reentrant; KEEPALIVE by default. On a cluster the keys must
// share a slot (one hash tag: {order:42}:stock, {order:42}:payment), or
// the server refuses them with ErrCrossSlot.
type MultiLock struct {
	c     *Client
	names []string
	owner string
	cfg   lockConfig
	h     holder

	mu    sync.Mutex
	t     *tenure
	holds int64
	bg    backlog
}

// MultiHold is one acquisition of a MultiLock. Release it once; Done and
// Err are the loss signal (any key lost).
type MultiHold struct {
	m        *MultiLock
	t        *tenure
	released atomic.Bool
}

// NewMultiLock returns the lock of every key in names (at least one, no
// duplicates).
func (c *Client) NewMultiLock(names []string, opts ...LockOption) *MultiLock {
	cfg := familyConfig(opts)
	names = append([]string(nil), names...)
	m := &MultiLock{c: c, names: names, owner: cfg.owner, cfg: cfg}
	first := ""
	if len(names) > 0 {
		first = names[0]
	}
	m.h = holder{c: c, key: first, name: fmt.Sprint(names), owner: cfg.owner, cfg: cfg,
		eventKeys: names,
		wants:     func(e string) bool { return e != "lock.acquired" && e != "lock.released" },
		renew: func(keepalive bool) [][]interface{} {
			cmds := make([][]interface{}, 0, len(names))
			for _, k := range names {
				a := []interface{}{"LOCK.RENEW", k, cfg.owner, "PX", ms(cfg.lease)}
				if keepalive {
					a = append(a, "KEEPALIVE")
				}
				cmds = append(cmds, m.h.withReplicas(a))
			}
			return cmds
		},
		look: func(ctx context.Context) (string, error) {
			for _, k := range names {
				reply, err := c.simple(ctx, first, "LOCK.INFO", k)
				if err != nil {
					return "", err
				}
				info, err := parseInfo(reply)
				if err != nil {
					return "", err
				}
				if info == nil || info.Owner != cfg.owner {
					return fmt.Sprintf("key %q is gone (expired, force-released or taken)", k), nil
				}
			}
			return "", nil
		},
	}
	return m
}

// Names are the keys; Owner the owner id they are taken with.
func (m *MultiLock) Names() []string { return append([]string(nil), m.names...) }
func (m *MultiLock) Owner() string   { return m.owner }

// Holds is how many holds this MultiLock has and has not released.
func (m *MultiLock) Holds() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current() == nil {
		return 0
	}
	return m.holds
}

func (m *MultiLock) what() string { return fmt.Sprintf("multi-lock %v", m.names) }

// TryAcquire takes (or re-enters) every key if all can be taken now;
// otherwise ErrNotAcquired, and no key changed.
func (m *MultiLock) TryAcquire(ctx context.Context) (*MultiHold, error) {
	return m.acquire(ctx, wait{block: -1})
}

// Acquire takes every key, waiting in the servers' queues as long as ctx
// allows (see Lock.Acquire). A cancelled Acquire never leaves a key held.
func (m *MultiLock) Acquire(ctx context.Context) (*MultiHold, error) {
	w, err := waitCtx(ctx)
	if err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w (%w)", m.what(), ErrNotAcquired, err)
	}
	return m.acquire(ctx, w)
}

// AcquireTimeout is Acquire bounded by timeout too.
func (m *MultiLock) AcquireTimeout(ctx context.Context, timeout time.Duration) (*MultiHold, error) {
	w, err := waitUpTo(ctx, timeout)
	if err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w (%w)", m.what(), ErrNotAcquired, err)
	}
	return m.acquire(ctx, w)
}

func (m *MultiLock) keyArgs(cmd string) []interface{} {
	a := []interface{}{cmd, len(m.names)}
	for _, k := range m.names {
		a = append(a, k)
	}
	return append(a, m.owner)
}

func (m *MultiLock) acquireArgs(block int64, keepalive bool) []interface{} {
	a := append(m.keyArgs("LOCK.MACQUIRE"), "PX", ms(m.cfg.lease))
	if block >= 0 {
		a = append(a, "BLOCK", block)
	}
	if keepalive {
		a = append(a, "KEEPALIVE")
	}
	return m.h.withReplicas(a)
}

func (m *MultiLock) current() *tenure {
	if m.t != nil && m.t.ended() {
		m.t, m.holds = nil, 0
	}
	return m.t
}

func (m *MultiLock) acquire(ctx context.Context, w wait) (*MultiHold, error) {
	if len(m.names) == 0 {
		return nil, errors.New("hashlock: a multi-lock needs at least one key")
	}
	if err := m.bg.settle(ctx); err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w", m.what(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.current(); t != nil {
		return m.reenter(ctx, t)
	}
	tied := m.cfg.keepalive || w.block >= 0
	isGrant := func(r interface{}) bool { a, ok := r.([]interface{}); return ok && len(a) == len(m.names) }
	sent := time.Now()
	reply, ln, err := m.h.grant(ctx, &m.bg, m.what(), w, m.acquireArgs(w.block, tied), isGrant)
	if err != nil {
		return nil, err
	}
	if !isGrant(reply) {
		ln.close()
		return nil, unexpected("an array of hold counts", reply)
	}
	var t *tenure
	if tied {
		if t, err = m.h.begin(ln, true, sent); err != nil {
			return nil, err
		}
	} else {
		ln.put()
		t = newTenure(nil)
		m.h.startWatch(t, sent, ln.conn.Addr())
	}
	m.t, m.holds = t, 1
	if !m.cfg.keepalive {
		// Lost (a key force-released, say): give back the other keys now
		// rather than at their lease (with KEEPALIVE the tie's close does).
		go func() {
			<-t.Done()
			if errors.Is(t.Err(), ErrLockLost) {
				m.releaseRemains(context.Background())
			}
		}()
	}
	return &MultiHold{m: m, t: t}, nil
}

func (m *MultiLock) reenter(ctx context.Context, t *tenure) (*MultiHold, error) {
	reply, err := m.h.send(ctx, t, m.acquireArgs(-1, m.cfg.keepalive))
	if err != nil {
		m.current()
		return nil, err
	}
	counts, _ := reply.([]interface{})
	fresh := reply == nil || len(counts) != len(m.names)
	for _, n := range counts {
		if c, _ := asInt(n); c != m.holds+1 {
			fresh = true
		}
	}
	if fresh {
		if reply != nil {
			_, _ = m.h.send(ctx, t, m.keyArgs("LOCK.MRELEASE"))
		}
		lost := m.h.lost("a re-entry found a key gone", nil)
		t.lose(lost)
		m.current()
		return nil, lost
	}
	m.holds++
	return &MultiHold{m: m, t: t}, nil
}

// Done is closed when the owner stops holding the keys (a key lost, or the
// last hold released); Err tells which.
func (h *MultiHold) Done() <-chan struct{} { return h.t.Done() }

// Err is nil while held, ErrReleased after the last release, else a
// *LostError.
func (h *MultiHold) Err() error { return h.t.Err() }

// Release drops one hold of every key; the last frees them all at once.
// A lost lock returns its *LostError (nothing is released: the server
// refuses an MRELEASE of keys the owner does not all hold; what remains
// lapses, or is released as the tie closes); a second Release, ErrReleased.
func (h *MultiHold) Release(ctx context.Context) error {
	m := h.m
	if !h.released.CompareAndSwap(false, true) {
		return fmt.Errorf("hashlock: %s: this hold was released already: %w", m.what(), ErrReleased)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.current()
	if t != h.t {
		if err := h.t.Err(); err != nil && err != ErrReleased {
			return err
		}
		return m.h.lost("it is not held", nil)
	}
	reply, err := m.h.send(ctx, t, m.keyArgs("LOCK.MRELEASE"))
	if err != nil {
		var ce *wire.Error
		if !m.cfg.keepalive && errors.As(err, &ce) {
			h.released.Store(false)
		}
		m.current()
		return err
	}
	counts, ok := reply.([]interface{})
	if !ok {
		return unexpected("an array of hold counts", reply)
	}
	m.holds--
	if m.holds == 0 {
		t.release()
		m.current()
	}
	if len(counts) != len(m.names) {
		return unexpected("an array of hold counts", reply)
	}
	return nil
}

// releaseRemains releases, key by key, every hold this owner still has
// (after a loss: MRELEASE refuses when one key is gone).
func (m *MultiLock) releaseRemains(ctx context.Context) {
	for _, k := range m.names {
		for i := 0; i < 1000; i++ {
			n, err := m.c.simpleInt(context.WithoutCancel(ctx), m.names[0], "LOCK.RELEASE", k, m.owner)
			if err != nil || n == 0 {
				break
			}
		}
	}
}
