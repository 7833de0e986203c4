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

// ReadWriteLock is a read-write lock on one key (RWLOCK.*), shared with
// Redisson's RReadWriteLock on the same name. One ReadWriteLock is one
// owner (a fresh UUID unless WithOwner), as a Lock is: many owners may
// read at once, one may write; the writer may also read (downgrade:
// WriteHold.Downgrade); an owner that only reads and asks to write gets
// ErrNoUpgrade at once (an upgrade deadlocks: release the reads first).
// Waits queue in the server, first come first served, and writers do not
// starve: a reader does not pass a queued writer.
//
// By default (KEEPALIVE) the owner's holds, both modes, are tied to a
// connection of the ReadWriteLock's own while it holds anything; their
// Done channels close when they are lost. Its methods are safe for
// concurrent use.
type ReadWriteLock struct {
	c     *Client
	name  string
	owner string
	cfg   lockConfig
	h     holder

	mu     sync.Mutex
	t      *tenure
	reads  int64
	writes int64
	bg     backlog
}

// RWLockInfo is RWLOCK.INFO's answer.
type RWLockInfo struct {
	Mode       string // "read" or "write"
	Writer     string // the writer's owner ("" in read mode)
	WriteHolds int64
	Readers    int64 // distinct reader owners
	ReadHolds  int64
	TTL        time.Duration
	Waiters    int64
	Keepalive  int64 // owners whose holds are tied
}

// RWHold is one acquisition (read or write) of a ReadWriteLock. Release
// it once; Done and Err are the owner's loss signal (both modes are lost
// together).
type RWHold struct {
	rw       *ReadWriteLock
	t        *tenure
	write    bool
	token    uint64
	released atomic.Bool
}

// NewReadWriteLock returns the read-write lock on key name.
func (c *Client) NewReadWriteLock(name string, opts ...LockOption) *ReadWriteLock {
	cfg := familyConfig(opts)
	rw := &ReadWriteLock{c: c, name: name, owner: cfg.owner, cfg: cfg}
	rw.h = holder{c: c, key: name, name: name, owner: cfg.owner, cfg: cfg,
		eventKeys: []string{name},
		wants:     func(e string) bool { return e != "rwlock.acquired" && e != "rwlock.released" },
		renew: func(keepalive bool) [][]interface{} {
			a := []interface{}{"RWLOCK.RENEW", name, cfg.owner, "PX", ms(cfg.lease)}
			if keepalive {
				a = append(a, "KEEPALIVE")
			}
			return [][]interface{}{rw.h.withReplicas(a)}
		},
		look: func(ctx context.Context) (string, error) {
			reply, err := c.simple(ctx, name, "HMGET", name, cfg.owner, cfg.owner+":write")
			if err != nil {
				return "", err
			}
			a, _ := reply.([]interface{})
			if len(a) != 2 {
				return "", nil
			}
			rw.mu.Lock()
			reads, writes := rw.reads, rw.writes
			rw.mu.Unlock()
			r, _ := asInt(a[0])
			w, _ := asInt(a[1])
			if (reads > 0 && r == 0) || (writes > 0 && w == 0) {
				return "its holds are gone (expired, force-released or deleted)", nil
			}
			return "", nil
		},
	}
	return rw
}

// Name is the lock's key; Owner the owner id it is taken with.
func (rw *ReadWriteLock) Name() string  { return rw.name }
func (rw *ReadWriteLock) Owner() string { return rw.owner }

// Holds are this owner's read and write holds not released, as last seen.
func (rw *ReadWriteLock) Holds() (reads, writes int64) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.current() == nil {
		return 0, 0
	}
	return rw.reads, rw.writes
}

// Read takes a read hold, waiting as long as ctx allows (see Lock.Acquire).
func (rw *ReadWriteLock) Read(ctx context.Context) (*RWHold, error) {
	return rw.acquireCtx(ctx, false)
}

// TryRead takes a read hold if grantable now; else ErrNotAcquired.
func (rw *ReadWriteLock) TryRead(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, false, wait{block: -1})
}

// ReadTimeout is Read bounded by timeout too.
func (rw *ReadWriteLock) ReadTimeout(ctx context.Context, timeout time.Duration) (*RWHold, error) {
	return rw.acquireTimeout(ctx, false, timeout)
}

// Write takes a write hold, waiting as long as ctx allows. ErrNoUpgrade
// if this owner holds it for reading only.
func (rw *ReadWriteLock) Write(ctx context.Context) (*RWHold, error) {
	return rw.acquireCtx(ctx, true)
}

// TryWrite takes a write hold if grantable now; else ErrNotAcquired.
func (rw *ReadWriteLock) TryWrite(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, true, wait{block: -1})
}

// WriteTimeout is Write bounded by timeout too.
func (rw *ReadWriteLock) WriteTimeout(ctx context.Context, timeout time.Duration) (*RWHold, error) {
	return rw.acquireTimeout(ctx, true, timeout)
}

func (rw *ReadWriteLock) what() string { return fmt.Sprintf("read-write lock %q", rw.name) }

func (rw *ReadWriteLock) acquireCtx(ctx context.Context, write bool) (*RWHold, error) {
	w, err := waitCtx(ctx)
	if err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w (%w)", rw.what(), ErrNotAcquired, err)
	}
	return rw.acquire(ctx, write, w)
}

func (rw *ReadWriteLock) acquireTimeout(ctx context.Context, write bool, timeout time.Duration) (*RWHold, error) {
	w, err := waitUpTo(ctx, timeout)
	if err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w (%w)", rw.what(), ErrNotAcquired, err)
	}
	return rw.acquire(ctx, write, w)
}

func modeName(write bool) string {
	if write {
		return "WRITE"
	}
	return "READ"
}

func (rw *ReadWriteLock) acquireArgs(write bool, block int64, keepalive bool) []interface{} {
	a := []interface{}{"RWLOCK.ACQUIRE", rw.name, rw.owner, modeName(write), "PX", ms(rw.cfg.lease)}
	if block >= 0 {
		a = append(a, "BLOCK", block)
	}
	if keepalive {
		a = append(a, "KEEPALIVE")
	}
	if write && rw.cfg.token {
		a = append(a, "TOKEN")
	}
	return rw.h.withReplicas(a)
}

// current is the tenure in force (nil when holding nothing). Under rw.mu.
func (rw *ReadWriteLock) current() *tenure {
	if rw.t != nil && rw.t.ended() {
		rw.t, rw.reads, rw.writes = nil, 0, 0
	}
	return rw.t
}

func (rw *ReadWriteLock) acquire(ctx context.Context, write bool, w wait) (*RWHold, error) {
	if err := rw.bg.settle(ctx); err != nil {
		return nil, fmt.Errorf("hashlock: %s: %w", rw.what(), err)
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if t := rw.current(); t != nil {
		return rw.reenter(ctx, t, write)
	}
	tied := rw.cfg.keepalive || w.block >= 0
	isGrant := func(r interface{}) bool {
		_, _, ok, err := parseGrant(r, write && rw.cfg.token)
		return ok && err == nil
	}
	sent := time.Now()
	reply, ln, err := rw.h.grant(ctx, &rw.bg, rw.what(), w, rw.acquireArgs(write, w.block, tied), isGrant)
	if err != nil {
		return nil, err
	}
	_, token, _, err := parseGrant(reply, write && rw.cfg.token)
	if err != nil {
		ln.close()
		return nil, err
	}
	var t *tenure
	if tied {
		if t, err = rw.h.begin(ln, true, sent); err != nil {
			return nil, err
		}
	} else {
		ln.put()
		t = newTenure(nil)
		rw.h.startWatch(t, sent, ln.conn.Addr())
	}
	rw.t, rw.reads, rw.writes = t, 0, 0
	if write {
		rw.writes = 1
	} else {
		rw.reads = 1
	}
	return &RWHold{rw: rw, t: t, write: write, token: token}, nil
}

// reenter: a further hold of an owner that holds the lock (never queued:
// a re-entry or a downgrade; an upgrade is ErrNoUpgrade). Under rw.mu.
func (rw *ReadWriteLock) reenter(ctx context.Context, t *tenure, write bool) (*RWHold, error) {
	reply, err := rw.h.send(ctx, t, rw.acquireArgs(write, -1, rw.cfg.keepalive))
	if err != nil {
		rw.current()
		return nil, err
	}
	if reply == nil {
		lost := rw.h.lost("a further acquisition found it held by another owner", nil)
		t.lose(lost)
		rw.current()
		return nil, lost
	}
	count, token, _, err := parseGrant(reply, write && rw.cfg.token)
	if err != nil {
		return nil, err
	}
	local := rw.reads
	if write {
		local = rw.writes
	}
	if count != local+1 {
		// Our holds had been lost and this call took it afresh: give it back.
		_, _ = rw.h.send(ctx, t, []interface{}{"RWLOCK.RELEASE", rw.name, rw.owner, modeName(write)})
		lost := rw.h.lost("a re-entry found its holds gone", nil)
		t.lose(lost)
		rw.current()
		return nil, lost
	}
	if write {
		rw.writes = count
	} else {
		rw.reads = count
	}
	return &RWHold{rw: rw, t: t, write: write, token: token}, nil
}

// Write reports whether this is a write hold.
func (h *RWHold) Write() bool { return h.write }

// Token is the fencing token of a write acquisition (WithToken), else 0.
func (h *RWHold) Token() uint64 { return h.token }

// Done is closed when the owner stops holding the lock (lost, or its last
// hold of either mode released); Err tells which.
func (h *RWHold) Done() <-chan struct{} { return h.t.Done() }

// Err is nil while held, ErrReleased after the owner's last release, else
// a *LostError.
func (h *RWHold) Err() error { return h.t.Err() }

// Downgrade turns a write hold into a read hold: it takes a read hold
// (never queued: the writer may read) and releases this write hold.
func (h *RWHold) Downgrade(ctx context.Context) (*RWHold, error) {
	if !h.write {
		return nil, fmt.Errorf("hashlock: %s: only a write hold downgrades", h.rw.what())
	}
	r, err := h.rw.TryRead(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.Release(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// Release drops this hold. The owner's last hold frees its part of the
// lock and gives its connection back to the pool. A lost lock returns its
// *LostError; a second Release of the same hold, ErrReleased.
func (h *RWHold) Release(ctx context.Context) error {
	rw := h.rw
	if !h.released.CompareAndSwap(false, true) {
		return fmt.Errorf("hashlock: %s: this hold was released already: %w", rw.what(), ErrReleased)
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	t := rw.current()
	if t != h.t {
		if err := h.t.Err(); err != nil && err != ErrReleased {
			return err
		}
		return rw.h.lost("it is not held", nil)
	}
	reply, err := rw.h.send(ctx, t, []interface{}{"RWLOCK.RELEASE", rw.name, rw.owner, modeName(h.write)})
	if err != nil {
		var ce *wire.Error
		if !rw.cfg.keepalive && errors.As(err, &ce) {
			h.released.Store(false) // unknown outcome: the caller may try again
		}
		rw.current()
		return err
	}
	left, ok := asInt(reply)
	if !ok {
		return unexpected("an integer", reply)
	}
	if h.write {
		rw.writes = left
	} else {
		rw.reads = left
	}
	if rw.reads+rw.writes == 0 {
		t.release()
		rw.current()
	}
	return nil
}

// Info is RWLOCK.INFO: nil when the lock is free.
func (rw *ReadWriteLock) Info(ctx context.Context) (*RWLockInfo, error) {
	reply, err := rw.c.simple(ctx, rw.name, "RWLOCK.INFO", rw.name)
	if err != nil {
		return nil, err
	}
	m, err := fieldMap(reply)
	if err != nil || m == nil {
		return nil, err
	}
	mode, _ := m["mode"].(string)
	writer, _ := m["writer"].(string)
	return &RWLockInfo{Mode: mode, Writer: writer, WriteHolds: intField(m, "writeholds"), Readers: intField(m, "readers"),
		ReadHolds: intField(m, "readholds"), TTL: ttlField(m, "ttl"), Waiters: intField(m, "waiters"), Keepalive: intField(m, "keepalive")}, nil
}

// ForceRelease removes every hold, whoever holds them (RWLOCK.FORCERELEASE);
// true if a lock was removed. Their holders' Done channels close.
func (rw *ReadWriteLock) ForceRelease(ctx context.Context) (bool, error) {
	n, err := rw.c.simpleInt(ctx, rw.name, "RWLOCK.FORCERELEASE", rw.name)
	return n == 1, err
}
