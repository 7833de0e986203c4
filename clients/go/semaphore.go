package hashlock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hashlock/internal/wire"
)

// Semaphore is a counting semaphore on one key (SEMAPHORE.*), shared with
// Redisson's RSemaphore and RPermitExpirableSemaphore on the same name:
// the key holds the number of available permits (a missing key has 0);
// leased permits are also recorded in {name}:timeout.
//
// Two kinds of permits: Acquire/Release take and give back anonymous
// permits (no owner: anyone may release them, as RSemaphore's); Lease
// takes permits with ids, returned by Lease.Release, and by default tied
// to a connection of the lease's own (KEEPALIVE): the server renews them
// while it is open and returns them the moment it closes.
//
// Waits queue in the server, first come first served (a head asking for 3
// is not overtaken by a later waiter asking for 1; a call that does not
// wait never jumps the queue). A cancelled wait never keeps permits.
type Semaphore struct {
	c    *Client
	name string
	cfg  lockConfig
	bg   backlog
}

// SemaphoreInfo is SEMAPHORE.INFO's answer.
type SemaphoreInfo struct {
	Available int64
	Leased    int64
	Waiters   int64
	Keepalive int64
	// TTL of the key; -1 = no expiry.
	TTL time.Duration
}

// NewSemaphore returns the semaphore on key name; opts apply to its
// leases (WithLease, WithoutKeepalive, WithReplicas, WithCheckInterval,
// WithoutEvents).
func (c *Client) NewSemaphore(name string, opts ...LockOption) *Semaphore {
	return &Semaphore{c: c, name: name, cfg: familyConfig(opts)}
}

func familyConfig(opts []LockOption) lockConfig {
	cfg := lockConfig{lease: DefaultLease, keepalive: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = newOwner()
	}
	if cfg.check <= 0 || (!cfg.keepalive && cfg.check > cfg.lease/3) {
		cfg.check = cfg.lease / 3 // the watchdog renews every third of the lease at least
	}
	return cfg
}

// Name is the semaphore's key.
func (s *Semaphore) Name() string { return s.name }

// Create sets the count to permits if no semaphore exists yet (true);
// else changes nothing (false). Redisson's trySetPermits.
func (s *Semaphore) Create(ctx context.Context, permits int64) (bool, error) {
	n, err := s.c.simpleInt(ctx, s.name, "SEMAPHORE.CREATE", s.name, permits)
	return n == 1, err
}

// Add adds delta permits (negative: removes them); queued waiters are
// served. It returns the permits available after.
func (s *Semaphore) Add(ctx context.Context, delta int64) (int64, error) {
	return s.c.simpleInt(ctx, s.name, "SEMAPHORE.ADD", s.name, delta)
}

// Available is the number of permits available now (0 when there is no
// semaphore).
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	i, err := s.Info(ctx)
	if err != nil || i == nil {
		return 0, err
	}
	return i.Available, nil
}

// Drain takes every available permit and returns how many.
func (s *Semaphore) Drain(ctx context.Context) (int64, error) {
	return s.c.simpleInt(ctx, s.name, "SEMAPHORE.DRAIN", s.name)
}

// Info is SEMAPHORE.INFO: nil when neither the key nor its leases exist.
func (s *Semaphore) Info(ctx context.Context) (*SemaphoreInfo, error) {
	reply, err := s.c.simple(ctx, s.name, "SEMAPHORE.INFO", s.name)
	if err != nil {
		return nil, err
	}
	m, err := fieldMap(reply)
	if err != nil || m == nil {
		return nil, err
	}
	return &SemaphoreInfo{Available: intField(m, "available"), Leased: intField(m, "leased"), Waiters: intField(m, "waiters"),
		Keepalive: intField(m, "keepalive"), TTL: ttlField(m, "ttl")}, nil
}

// Release gives n anonymous permits back (anyone may); queued waiters are
// served. It returns the permits available after.
func (s *Semaphore) Release(ctx context.Context, n int) (int64, error) {
	if n < 1 {
		return 0, fmt.Errorf("hashlock: semaphore %q: permits must be >= 1", s.name)
	}
	return s.c.simpleInt(ctx, s.name, "SEMAPHORE.RELEASE", s.name, "COUNT", n)
}

// TryAcquire takes n anonymous permits if they are available now and
// nobody is queued; otherwise ErrNotAcquired at once.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) error {
	return s.acquire(ctx, n, wait{block: -1})
}

// Acquire takes n anonymous permits, waiting in the server's queue as long
// as ctx allows (its deadline becomes the server's BLOCK: ErrNotAcquired,
// also matching context.DeadlineExceeded). Cancelling ctx ends the wait in
// the server (CLIENT UNBLOCK from another connection), reads its answer,
// and releases permits it had granted, before Acquire returns: a
// cancelled Acquire never keeps permits.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	w, err := waitCtx(ctx)
	if err != nil {
		return fmt.Errorf("hashlock: semaphore %q: %w (%w)", s.name, ErrNotAcquired, err)
	}
	return s.acquire(ctx, n, w)
}

// AcquireTimeout is Acquire with the wait bounded by timeout too (<= 0:
// TryAcquire).
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int, timeout time.Duration) error {
	w, err := waitUpTo(ctx, timeout)
	if err != nil {
		return fmt.Errorf("hashlock: semaphore %q: %w (%w)", s.name, ErrNotAcquired, err)
	}
	return s.acquire(ctx, n, w)
}

func (s *Semaphore) what() string { return fmt.Sprintf("semaphore %q", s.name) }

func (s *Semaphore) acquire(ctx context.Context, n int, w wait) error {
	if n < 1 {
		return fmt.Errorf("hashlock: semaphore %q: permits must be >= 1", s.name)
	}
	if err := s.bg.settle(ctx); err != nil {
		return fmt.Errorf("hashlock: %s: %w", s.what(), err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hashlock: %s: %w", s.what(), err)
	}
	args := []interface{}{"SEMAPHORE.ACQUIRE", s.name, "COUNT", n}
	if w.block >= 0 {
		args = append(args, "BLOCK", w.block)
	}
	h := holder{c: s.c, key: s.name, cfg: s.cfg}
	args = h.withReplicas(args)
	var reply interface{}
	var addr string
	if w.block < 0 {
		r, err := s.c.simple(context.WithoutCancel(ctx), s.name, args...)
		if err != nil {
			return err
		}
		reply = r
	} else {
		r, ln, err := s.c.unblockingCall(ctx, s.name, h.timeout(w.block), args, func(r interface{}) []interface{} {
			if got, ok := r.(int64); ok && got > 0 {
				return []interface{}{"SEMAPHORE.RELEASE", s.name, "COUNT", got}
			}
			return nil
		})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && w.deadline {
				return fmt.Errorf("hashlock: %s: %w (%w)", s.what(), ErrNotAcquired, err)
			}
			return fmt.Errorf("hashlock: %s: %w", s.what(), err)
		}
		ln.put()
		reply, addr = r, ln.conn.Addr()
	}
	if se, ok := reply.(wire.ServerError); ok {
		return serverError(addr, se)
	}
	if reply == nil {
		return notAcquired(s.what(), w)
	}
	return nil
}

// doResult is the outcome of a Conn.Do run in the background.
type doResult struct {
	replies []interface{}
	err     error
}

// unblockingCall runs a wait whose grant only its reply identifies
// (anonymous permits: closing the connection would not give them back).
// If ctx ends first, the server ends the wait (CLIENT UNBLOCK from another
// connection, repeated until the answer arrives), the answer is read, and
// undo(answer), if not nil, is sent on the same connection to give back
// what it granted — all before it returns ctx's error. Only if the server
// cannot be asked (no CLIENT ID, CLIENT UNBLOCK refused, no answer within
// a few seconds) is the connection closed instead. Redirects are followed.
func (c *Client) unblockingCall(ctx context.Context, key string, timeout time.Duration, args []interface{},
	undo func(reply interface{}) []interface{}) (interface{}, *link, error) {
	p, err := c.poolForKey(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	asking := false
	for redirects := 0; ; redirects++ {
		conn, err := p.Get(ctx)
		if err != nil {
			return nil, nil, err
		}
		ln := &link{conn: conn, pool: p}
		cmds := [][]interface{}{args}
		if asking {
			cmds = [][]interface{}{{"ASKING"}, args}
		}
		done := make(chan doResult, 1)
		go func() {
			r, err := conn.Do(context.Background(), timeout, cmds...)
			done <- doResult{r, err}
		}()
		var res doResult
		select {
		case res = <-done:
		case <-ctx.Done():
			res, closed := c.unblock(ln, done)
			if closed {
				// The server could not be asked: ln was closed (what was tied to it is returned by the server).
				return nil, nil, &wire.Error{Addr: conn.Addr(), ID: conn.ID(), Sent: true, Err: ctx.Err()}
			}
			if res.err == nil {
				reply := res.replies[len(res.replies)-1]
				if _, isErr := reply.(wire.ServerError); !isErr {
					if u := undo(reply); u != nil {
						bg, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
						_, uerr := conn.Do(bg, c.cfg.callTimeout, u)
						cancel()
						if uerr != nil {
							return nil, nil, &wire.Error{Addr: conn.Addr(), ID: conn.ID(), Sent: true, Err: ctx.Err()}
						}
					}
				}
				ln.put()
			}
			// Answered (nil, or a grant given back): nothing is left on the server.
			return nil, nil, fmt.Errorf("the wait was ended in the server, nothing kept: %w", ctx.Err())
		}
		if res.err != nil {
			return nil, nil, res.err
		}
		reply := res.replies[len(res.replies)-1]
		se, isErr := reply.(wire.ServerError)
		if !isErr || redirects >= maxRedirects {
			return reply, ln, nil
		}
		kind, addr, ok := redirect(string(se), conn.Addr())
		if !ok {
			return reply, ln, nil
		}
		ln.put()
		if kind == "MOVED" && c.cluster != nil {
			c.cluster.ReloadState(ctx)
		}
		if p, err = c.poolForAddr(ctx, key, addr); err != nil {
			return nil, nil, err
		}
		asking = kind == "ASK"
	}
}

// unblock ends the wait on ln in the server (CLIENT UNBLOCK on another
// connection, repeated: it may overtake the command) and returns the
// wait's result; if the server cannot be asked or does not answer within
// a few seconds, ln is closed (the server drops the waiter with it) and
// the result is that failure.
func (c *Client) unblock(ln *link, done <-chan doResult) (res doResult, closed bool) {
	id := ln.conn.ID()
	deadline := time.Now().Add(5 * time.Second)
	for id != 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
		probe, err := ln.pool.Get(ctx)
		if err != nil {
			cancel()
			break
		}
		replies, err := probe.Do(ctx, c.cfg.callTimeout, []interface{}{"CLIENT", "UNBLOCK", id})
		cancel()
		if err != nil {
			break
		}
		ln.pool.Put(probe)
		n, isInt := replies[0].(int64)
		if !isInt {
			break // refused (NOPERM ...)
		}
		// 1: unblocked, its answer is on its way; 0: not blocked (yet, or answered already).
		wait := 2 * time.Millisecond
		if n == 1 {
			wait = time.Second
		}
		select {
		case r := <-done:
			return r, false
		case <-time.After(wait):
		}
	}
	ln.close()
	return <-done, true
}

// Lease is permits leased from a Semaphore, each with an id (32 hex
// characters, as Redisson's RPermitExpirableSemaphore shows them). Release
// returns them. Done is closed when the lease ends: released, or lost —
// its connection closed (the server returned the permits), its lease
// lapsed, someone else returned its ids (a Redisson client's release(id)),
// the semaphore was deleted; Err tells which.
type Lease struct {
	s        *Semaphore
	h        holder
	ids      []string
	t        *tenure
	mu       sync.Mutex
	released bool
	// returning: Release sent SEMAPHORE.RETURN (its own semaphore.released
	// event must not make the watcher call the permits lost).
	returning atomic.Bool
}

// IDs are the permits' ids.
func (l *Lease) IDs() []string { return append([]string(nil), l.ids...) }

// Permits is how many permits the lease holds.
func (l *Lease) Permits() int { return len(l.ids) }

// Done is closed when the lease ends (released or lost).
func (l *Lease) Done() <-chan struct{} { return l.t.Done() }

// Err is nil while held, ErrReleased after Release, else a *LostError.
func (l *Lease) Err() error { return l.t.Err() }

// TryLease leases n permits if they are available now and nobody is
// queued; otherwise ErrNotAcquired at once.
func (s *Semaphore) TryLease(ctx context.Context, n int) (*Lease, error) {
	return s.lease(ctx, n, wait{block: -1})
}

// Lease leases n permits, waiting in the server's queue as long as ctx
// allows. The wait is tied to its connection: cancelling ctx closes it, so
// the server drops the waiter and returns permits granted on it. A
// cancelled Lease never keeps permits.
func (s *Semaphore) Lease(ctx context.Context, n int) (*Lease, error) {
	w, err := waitCtx(ctx)
	if err != nil {
		return nil, fmt.Errorf("hashlock: semaphore %q: %w (%w)", s.name, ErrNotAcquired, err)
	}
	return s.lease(ctx, n, w)
}

// LeaseTimeout is Lease with the wait bounded by timeout too (<= 0:
// TryLease).
func (s *Semaphore) LeaseTimeout(ctx context.Context, n int, timeout time.Duration) (*Lease, error) {
	w, err := waitUpTo(ctx, timeout)
	if err != nil {
		return nil, fmt.Errorf("hashlock: semaphore %q: %w (%w)", s.name, ErrNotAcquired, err)
	}
	return s.lease(ctx, n, w)
}

// timeoutKey is Redisson's suffixName(name, "timeout").
func timeoutKey(name string) string {
	if strings.Contains(name, "{") {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}

func (s *Semaphore) lease(ctx context.Context, n int, w wait) (*Lease, error) {
	if n < 1 {
		return nil, fmt.Errorf("hashlock: semaphore %q: permits must be >= 1", s.name)
	}
	l := &Lease{s: s}
	l.h = holder{c: s.c, key: s.name, name: s.name, owner: "lease", cfg: s.cfg,
		eventKeys: []string{s.name},
		wants:     func(e string) bool { return e != "semaphore.acquired" },
		renew: func(keepalive bool) [][]interface{} {
			cmds := make([][]interface{}, 0, len(l.ids))
			for _, id := range l.ids {
				a := []interface{}{"SEMAPHORE.RENEW", s.name, id, "PX", ms(s.cfg.lease)}
				if keepalive {
					a = append(a, "KEEPALIVE")
				}
				cmds = append(cmds, l.h.withReplicas(a))
			}
			return cmds
		},
		look: func(ctx context.Context) (string, error) {
			args := []interface{}{"ZMSCORE", timeoutKey(s.name)}
			for _, id := range l.ids {
				raw, err := hex.DecodeString(id)
				if err != nil {
					return "", err
				}
				args = append(args, raw)
			}
			reply, err := s.c.simple(ctx, s.name, args...)
			if err != nil {
				return "", err
			}
			scores, _ := reply.([]interface{})
			if l.returning.Load() {
				return "", nil
			}
			for _, sc := range scores {
				if sc == nil {
					return "a permit was returned by someone else, lapsed, or the semaphore was deleted", nil
				}
			}
			return "", nil
		},
	}
	tied := s.cfg.keepalive || w.block >= 0
	args := []interface{}{"SEMAPHORE.LEASE", s.name, "COUNT", n, "PX", ms(s.cfg.lease)}
	if tied {
		args = append(args, "KEEPALIVE")
	}
	if w.block >= 0 {
		args = append(args, "BLOCK", w.block)
	}
	args = l.h.withReplicas(args)
	sent := time.Now()
	var reply interface{}
	var ln *link
	var err error
	if w.block < 0 {
		isGrant := func(r interface{}) bool { a, ok := r.([]interface{}); return ok && len(a) > 0 }
		if reply, ln, err = l.h.grant(ctx, &s.bg, s.what(), w, args, isGrant); err != nil {
			return nil, err
		}
	} else if reply, ln, err = s.waitLease(ctx, w, args); err != nil {
		return nil, err
	}
	a, ok := reply.([]interface{})
	if !ok || len(a) != n {
		ln.close() // returns what is tied
		return nil, unexpected(fmt.Sprintf("%d permit ids", n), reply)
	}
	for _, id := range a {
		str, _ := id.(string)
		l.ids = append(l.ids, str)
	}
	if !tied {
		ln.put()
		l.t = newTenure(nil)
		l.h.startWatch(l.t, sent, ln.conn.Addr())
		return l, nil
	}
	t, err := l.h.begin(ln, true, sent)
	if err != nil {
		return nil, err
	}
	l.t = t
	return l, nil
}

// waitLease runs a lease's wait. Only the reply names the permits, so a
// cancelled wait is ended by the server (CLIENT UNBLOCK) and its answer
// read, and permits it granted are returned (SEMAPHORE.RETURN on the same
// connection) before it returns: closing the connection is not relied
// upon (the wait is tied with KEEPALIVE all the same, for when the server
// cannot be asked).
func (s *Semaphore) waitLease(ctx context.Context, w wait, args []interface{}) (interface{}, *link, error) {
	if err := s.bg.settle(ctx); err != nil {
		return nil, nil, fmt.Errorf("hashlock: %s: %w", s.what(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("hashlock: %s: %w", s.what(), err)
	}
	h := holder{c: s.c, cfg: s.cfg}
	reply, ln, err := s.c.unblockingCall(ctx, s.name, h.timeout(w.block), args, func(r interface{}) []interface{} {
		ids, ok := r.([]interface{})
		if !ok || len(ids) == 0 {
			return nil
		}
		return append([]interface{}{"SEMAPHORE.RETURN", s.name}, ids...)
	})
	if err != nil {
		var ce *wire.Error
		if errors.As(err, &ce) && ce.Sent {
			s.c.awaitGone(s.name, ce.Addr, ce.ID) // closed instead: the server returns what was tied
		}
		if errors.Is(err, context.DeadlineExceeded) && w.deadline {
			return nil, nil, fmt.Errorf("hashlock: %s: %w (%w)", s.what(), ErrNotAcquired, err)
		}
		return nil, nil, fmt.Errorf("hashlock: %s: %w", s.what(), err)
	}
	if se, ok := reply.(wire.ServerError); ok {
		ln.put()
		return nil, nil, serverError(ln.conn.Addr(), se)
	}
	if reply == nil {
		ln.put()
		return nil, nil, notAcquired(s.what(), w)
	}
	return reply, ln, nil
}

// Renew sets every permit's lease from now (with KEEPALIVE: ties them to
// the lease's connection again). ErrLockLost if a permit is gone.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.t.Err(); err != nil {
		return err
	}
	if err := l.h.renewAll(ctx, l.t, l.s.cfg.keepalive); err != nil {
		if le := (*LostError)(nil); errors.As(err, &le) {
			l.t.lose(err)
		}
		return err
	}
	return nil
}

// Release returns the permits (queued waiters are served). If some were
// returned already other than by this lease, it returns the loss (the
// others are returned all the same); a second Release, ErrReleased.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("hashlock: lease of semaphore %q: released already: %w", l.s.name, ErrReleased)
	}
	l.released = true
	if err := l.t.Err(); err != nil && err != ErrReleased {
		l.returnEach(ctx)
		return err
	}
	l.returning.Store(true)
	args := []interface{}{"SEMAPHORE.RETURN", l.s.name}
	for _, id := range l.ids {
		args = append(args, id)
	}
	_, err := l.h.send(ctx, l.t, args)
	if err != nil {
		if le := (*LostError)(nil); errors.As(err, &le) {
			l.returnEach(ctx)
		}
		return err
	}
	l.t.release()
	return nil
}

// returnEach returns, one by one, the ids still leased (after a loss).
func (l *Lease) returnEach(ctx context.Context) {
	for _, id := range l.ids {
		_, _ = l.s.c.simple(context.WithoutCancel(ctx), l.s.name, "SEMAPHORE.RETURN", l.s.name, id)
	}
}
