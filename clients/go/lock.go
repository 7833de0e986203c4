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

// Lock is a reentrant lock on one key, shared with every LOCK.* client and
// with Redisson's RLock. One Lock is one owner (a fresh UUID unless
// WithOwner): re-entry is by owner, so give each goroutine that locks on
// its own a Lock of its own. Its methods are safe for concurrent use.
//
// By default the lock is taken with KEEPALIVE: it is tied to a connection
// the Lock holds while the lock is held, the server renews the lease for as
// long as that connection is open and releases the lock the moment it
// closes (process killed, network lost). WithoutKeepalive runs a watchdog
// goroutine that renews the lease instead.
type Lock struct {
	c     *Client
	name  string
	owner string
	cfg   lockConfig

	// mu serialises the operations (a wait included).
	mu    sync.Mutex
	ten   atomic.Pointer[tenure]
	holds atomic.Int64
	bg    backlog
}

type lockConfig struct {
	lease     time.Duration
	keepalive bool
	token     bool
	replicas  int
	replicasT time.Duration
	owner     string
	check     time.Duration
	noEvents  bool
}

// LockOption configures NewLock.
type LockOption func(*lockConfig)

// WithLease sets the lease every acquisition and renewal sets (default
// DefaultLease). With KEEPALIVE it is the safety net for when the tie
// cannot follow (failover, restart); without, the watchdog renews it every
// third.
func WithLease(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithoutKeepalive takes the lock as a plain lease renewed by a watchdog
// goroutine (every third of the lease, or WithCheckInterval) instead of
// tying it to a connection.
func WithoutKeepalive() LockOption {
	return func(c *lockConfig) { c.keepalive = false }
}

// WithToken asks for a fencing token with every acquisition (Hold.Token):
// a number that grows with every acquisition of the key, shared with
// Redisson's RFencedLock. Pass it to the resource you protect.
func WithToken() LockOption {
	return func(c *lockConfig) { c.token = true }
}

// WithReplicas makes the server answer a grant or renewal only once n
// replicas have it, within timeout (0: DefaultReplicasTimeout); otherwise
// it undoes it and the call fails with ErrNoReplicas.
func WithReplicas(n int, timeout time.Duration) LockOption {
	return func(c *lockConfig) {
		if timeout <= 0 {
			timeout = DefaultReplicasTimeout
		}
		c.replicas, c.replicasT = n, timeout
	}
}

// WithOwner sets the owner id (default: a fresh UUID per Lock), e.g.
// Redisson's "<uuid>:<thread id>" to re-enter a lock a Redisson client
// holds.
func WithOwner(owner string) LockOption {
	return func(c *lockConfig) { c.owner = owner }
}

// WithCheckInterval sets how often a held lock is looked at (KEEPALIVE:
// LOCK.INFO on its connection, which finds a force-release or expiry and
// re-ties a lock that lost its tie) or renewed (watchdog). Default: a
// third of the lease. A closed connection is noticed at once, whatever
// the interval.
func WithCheckInterval(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d > 0 {
			c.check = d
		}
	}
}

// WithoutEvents leaves the lock's keyspace channel alone: a loss that its
// connection does not show (a force-release, an expiry) is then found by
// the periodic check only. By default a held lock whose server sends
// lifecycle events (notify-keyspace-events with K or E, and d) is watched
// through them too, on the Client's one subscriber connection per server,
// and learns of such a loss as it happens.
func WithoutEvents() LockOption {
	return func(c *lockConfig) { c.noEvents = true }
}

// NewLock returns the lock on key name.
func (c *Client) NewLock(name string, opts ...LockOption) *Lock {
	cfg := lockConfig{lease: DefaultLease, keepalive: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = newOwner()
	}
	if cfg.check <= 0 {
		cfg.check = cfg.lease / 3
	}
	return &Lock{c: c, name: name, owner: cfg.owner, cfg: cfg}
}

// Name is the lock's key.
func (l *Lock) Name() string { return l.name }

// Owner is the owner id the lock is taken with.
func (l *Lock) Owner() string { return l.owner }

// Holds is how many holds this Lock has and has not released, as last
// seen (0 once the lock is found lost).
func (l *Lock) Holds() int64 {
	if t := l.ten.Load(); t == nil || t.ended() {
		return 0
	}
	return l.holds.Load()
}

// Hold is one acquisition of a Lock. Release it once; its Done channel is
// the lock's loss signal.
type Hold struct {
	l        *Lock
	t        *tenure
	token    uint64
	released atomic.Bool
}

// Token is the fencing token of this acquisition (WithToken), else 0.
func (h *Hold) Token() uint64 { return h.token }

// Lock is the Lock this hold belongs to.
func (h *Hold) Lock() *Lock { return h.l }

// Done is closed when the lock stops being held by this owner: it was
// lost (its connection closed or failed, the server shut down, it was
// force-released, it expired, a renewal failed) or its last hold was
// released. Err tells which. Like context.Context.Done: select on it
// while working under the lock.
func (h *Hold) Done() <-chan struct{} { return h.t.Done() }

// Err is nil while the lock is held, ErrReleased after its last hold was
// released, else a *LostError (errors.Is(err, ErrLockLost)) saying why it
// was lost.
func (h *Hold) Err() error { return h.t.Err() }

// Context returns a context derived from parent that is cancelled when
// the lock stops being held (see Done); context.Cause gives Err.
func (h *Hold) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if h.t.ended() {
		cancel(h.t.Err())
		return ctx, func() { cancel(context.Canceled) }
	}
	go func() {
		select {
		case <-h.t.Done():
			cancel(h.t.Err())
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// TryAcquire takes (or re-enters) the lock if it is free now; otherwise
// it fails with ErrNotAcquired at once.
func (l *Lock) TryAcquire(ctx context.Context) (*Hold, error) {
	return l.acquire(ctx, wait{block: -1})
}

// Acquire takes (or re-enters) the lock, waiting in the server's FIFO
// queue for as long as ctx allows: until ctx's deadline (the server ends
// the wait then: ErrNotAcquired, also matching context.DeadlineExceeded)
// or, without one, forever. Cancelling ctx closes the wait's connection,
// so the server forgets the waiter; a grant already on its way is given
// back at once. A cancelled Acquire never leaves the lock held.
func (l *Lock) Acquire(ctx context.Context) (*Hold, error) {
	w := wait{block: 0}
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		if rem <= 0 {
			return nil, fmt.Errorf("hashlock: lock %q: %w (%w)", l.name, ErrNotAcquired, context.DeadlineExceeded)
		}
		w = wait{block: ms(rem), deadline: true}
	}
	return l.acquire(ctx, w)
}

// AcquireTimeout is Acquire with the wait bounded by timeout too (the
// server ends the wait then: ErrNotAcquired). timeout <= 0 is TryAcquire.
func (l *Lock) AcquireTimeout(ctx context.Context, timeout time.Duration) (*Hold, error) {
	if timeout <= 0 {
		return l.TryAcquire(ctx)
	}
	w := wait{block: ms(timeout)}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		rem := time.Until(dl)
		if rem <= 0 {
			return nil, fmt.Errorf("hashlock: lock %q: %w (%w)", l.name, ErrNotAcquired, context.DeadlineExceeded)
		}
		w = wait{block: ms(rem), deadline: true}
	}
	return l.acquire(ctx, w)
}

// wait: block < 0 = no BLOCK, 0 = forever, else milliseconds; deadline:
// set from the context's deadline.
type wait struct {
	block    int64
	deadline bool
}

func (l *Lock) acquireArgs(block int64) []interface{} {
	args := []interface{}{"LOCK.ACQUIRE", l.name, l.owner, "PX", ms(l.cfg.lease)}
	if block >= 0 {
		args = append(args, "BLOCK", block)
	}
	if l.cfg.keepalive {
		args = append(args, "KEEPALIVE")
	}
	if l.cfg.token {
		args = append(args, "TOKEN")
	}
	return l.withReplicas(args)
}

func (l *Lock) renewArgs() []interface{} {
	args := []interface{}{"LOCK.RENEW", l.name, l.owner, "PX", ms(l.cfg.lease)}
	if l.cfg.keepalive {
		args = append(args, "KEEPALIVE")
	}
	return l.withReplicas(args)
}

func (l *Lock) withReplicas(args []interface{}) []interface{} {
	if l.cfg.replicasT > 0 {
		args = append(args, "REPLICAS", l.cfg.replicas, ms(l.cfg.replicasT))
	}
	return args
}

func (l *Lock) releaseArgs() []interface{} {
	return []interface{}{"LOCK.RELEASE", l.name, l.owner}
}

// timeout is how long a call may take to answer: 0 = no limit (BLOCK 0).
func (l *Lock) timeout(block int64) time.Duration {
	extra := l.cfg.replicasT
	switch {
	case block == 0:
		return 0
	case block > 0:
		return time.Duration(block)*time.Millisecond + extra + responseMargin
	}
	return l.c.cfg.callTimeout + extra
}

// current is the tenure in force (nil when not holding); a tenure that
// ended is dropped.
func (l *Lock) current() *tenure {
	t := l.ten.Load()
	if t != nil && t.ended() {
		l.ten.Store(nil)
		l.holds.Store(0)
		return nil
	}
	return t
}

func (l *Lock) lost(reason string, cause error) *LostError {
	return &LostError{Name: l.name, Owner: l.owner, Reason: reason, Err: cause}
}

func (l *Lock) acquire(ctx context.Context, w wait) (*Hold, error) {
	if err := l.bg.settle(ctx); err != nil {
		return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.current(); t != nil {
		return l.reenter(ctx, t)
	}
	// Only a wait can be abandoned; a call that answers at once runs to its
	// end (bounded by the call timeout).
	callCtx := ctx
	if w.block < 0 {
		callCtx = context.WithoutCancel(ctx)
	}
	// A grant that is not tied to the connection outlives it: if the call
	// is abandoned after it was sent, it must be given back.
	var undo []interface{}
	if !l.cfg.keepalive {
		undo = l.releaseArgs()
	}
	isGrant := func(reply interface{}) bool {
		_, _, granted, err := parseGrant(reply, l.cfg.token)
		return granted && err == nil
	}
	sent := time.Now()
	reply, ln, err := l.c.grantCall(callCtx, &l.bg, l.name, l.timeout(w.block), l.acquireArgs(w.block), undo, isGrant)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && w.deadline {
			return nil, fmt.Errorf("hashlock: lock %q: %w (%w)", l.name, ErrNotAcquired, err)
		}
		return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
	}
	if se, ok := reply.(wire.ServerError); ok {
		ln.put()
		return nil, serverError(ln.conn.Addr(), se)
	}
	count, token, granted, err := parseGrant(reply, l.cfg.token)
	if err != nil {
		ln.close()
		return nil, err
	}
	if !granted {
		ln.put() // answered: the waiter left the queue, the connection is clean
		return nil, l.notAcquired(w)
	}
	var tied *link
	addr := ln.conn.Addr()
	if l.cfg.keepalive {
		tied = ln
	} else {
		ln.put()
	}
	t := newTenure(tied)
	l.holds.Store(count)
	l.ten.Store(t)
	l.startWatch(t, sent, addr)
	return &Hold{l: l, t: t, token: token}, nil
}

func (l *Lock) notAcquired(w wait) error {
	switch {
	case w.block < 0:
		return fmt.Errorf("hashlock: lock %q is held by another owner: %w", l.name, ErrNotAcquired)
	case w.deadline:
		return fmt.Errorf("hashlock: lock %q not acquired before the context's deadline: %w (%w)", l.name, ErrNotAcquired, context.DeadlineExceeded)
	case w.block > 0:
		return fmt.Errorf("hashlock: lock %q not acquired within %d ms: %w", l.name, w.block, ErrNotAcquired)
	}
	return fmt.Errorf("hashlock: lock %q: the server ended the wait without the lock (CLIENT UNBLOCK?): %w", l.name, ErrNotAcquired)
}

// reenter adds a hold to the tenure t in force.
func (l *Lock) reenter(ctx context.Context, t *tenure) (*Hold, error) {
	reply, err := l.onHold(ctx, t, l.acquireArgs(-1))
	if err != nil {
		return nil, err
	}
	count, token, granted, err := parseGrant(reply, l.cfg.token)
	if err != nil {
		return nil, err
	}
	if granted && count == l.holds.Load()+1 {
		l.holds.Store(count)
		return &Hold{l: l, t: t, token: token}, nil
	}
	if granted && !l.cfg.keepalive {
		// The lock had been lost and this call took it afresh: give it
		// back (with KEEPALIVE, losing the tenure closes its connection,
		// which releases it).
		_, _ = l.onHold(ctx, t, l.releaseArgs())
	}
	lost := l.lost("a re-entry found it gone", nil)
	t.lose(lost)
	l.current()
	return nil, lost
}

// onHold sends args for the tenure t: on its tied connection (KEEPALIVE),
// else on a pooled one. It runs to its end whatever ctx does (only waits
// are cancelled: cancelling this would close the lock's connection and so
// release the lock). A failure of the tied connection loses the lock (the
// server released it when the connection closed). Server error replies
// come back as *ServerError; NOTOWNER, NOTLOCK and WRONGTYPE end the
// tenure as lost.
func (l *Lock) onHold(ctx context.Context, t *tenure, args []interface{}) (interface{}, error) {
	timeout := l.timeout(-1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var reply interface{}
	var addr string
	if l.cfg.keepalive {
		t.op.Lock()
		defer t.op.Unlock()
		ln := t.tied()
		if ln == nil {
			if err := t.Err(); err != nil && err != ErrReleased {
				return nil, err
			}
			return nil, l.lost("it is not held", nil)
		}
		replies, err := ln.conn.Do(ctx, timeout, args)
		if err != nil {
			lost := l.lost("its KEEPALIVE connection failed", err)
			t.lose(lost)
			return nil, lost
		}
		reply, addr = replies[0], ln.conn.Addr()
		if se, ok := reply.(wire.ServerError); ok {
			if _, _, moved := redirect(string(se), addr); moved {
				return l.follow(ctx, t, args)
			}
		}
	} else {
		r, ln, err := l.c.call(ctx, l.name, nil, timeout, args)
		if err != nil {
			return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
		}
		reply, addr = r, ln.conn.Addr()
		ln.put()
	}
	if se, ok := reply.(wire.ServerError); ok {
		e := serverError(addr, se)
		if errors.Is(e, ErrNotOwner) || errors.Is(e, ErrNotLock) || errors.Is(e, ErrWrongType) {
			lost := l.lost("the server says it is not held", e)
			t.lose(lost)
			return nil, lost
		}
		return nil, e
	}
	return reply, nil
}

// follow runs args, which the tied connection's server redirected (the
// key's slot moved), on the server that has the key now, and ties the lock
// to that connection (LOCK.RENEW ... KEEPALIVE). Called with t.op held.
func (l *Lock) follow(ctx context.Context, t *tenure, args []interface{}) (interface{}, error) {
	timeout := l.timeout(-1)
	reply, ln, err := l.c.call(ctx, l.name, nil, timeout, args)
	if err != nil {
		return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
	}
	if se, ok := reply.(wire.ServerError); ok {
		ln.put()
		e := serverError(ln.conn.Addr(), se)
		if errors.Is(e, ErrNotOwner) || errors.Is(e, ErrNotLock) || errors.Is(e, ErrWrongType) {
			lost := l.lost("the server says it is not held", e)
			t.lose(lost)
			return nil, lost
		}
		return nil, e
	}
	// Still held after args (not the last release): tie it here.
	if left, isInt := reply.(int64); isInt && args[0] == "LOCK.RELEASE" && left == 0 {
		ln.put()
		return reply, nil
	}
	replies, err := ln.conn.Do(ctx, timeout, l.renewArgs())
	if err != nil {
		lost := l.lost("re-tying it on the key's new server failed", err)
		t.lose(lost)
		return nil, lost
	}
	if n, _ := replies[0].(int64); n != 1 {
		ln.put()
		lost := l.lost("it was gone when re-tied on the key's new server", nil)
		t.lose(lost)
		return nil, lost
	}
	t.retie(ln)
	return reply, nil
}

// startWatch runs t's watcher: KEEPALIVE: its connection's end, and a
// LOCK.INFO on it every check interval and at every lifecycle event on the
// key; watchdog: a renewal every check interval, and a LOCK.INFO at every
// event.
func (l *Lock) startWatch(t *tenure, sent time.Time, addr string) {
	connLost := func(cause error) error {
		return l.lost("its KEEPALIVE connection closed", cause)
	}
	var events func(addr string) *keyWatch
	if !l.cfg.noEvents {
		events = func(addr string) *keyWatch { return l.subscribe(sent, addr) }
	}
	if l.cfg.keepalive {
		t.watch(l.cfg.check, func() error { return l.checkTied(t, true) }, func() error { return l.checkTied(t, false) }, connLost, addr, events)
		return
	}
	renewed := time.Now()
	t.watch(l.cfg.check, func() error {
		started := time.Now()
		err := l.renewOnce(t)
		if err == nil {
			renewed = started
			return nil
		}
		if errors.Is(err, ErrLockLost) {
			return err
		}
		if time.Since(renewed) >= l.cfg.lease {
			return l.lost("no renewal succeeded within the lease", err)
		}
		return nil // transient: the next tick tries again
	}, func() error { return l.look(t) }, connLost, addr, events)
}

// look: the watchdog's look at an event (LOCK.INFO; a renewal would
// extend a lease someone just shortened). Lost when another owner or
// nobody holds it.
func (l *Lock) look(t *tenure) error {
	if t.ended() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.callTimeout)
	defer cancel()
	info, err := l.Info(ctx)
	if err != nil || t.ended() {
		return nil // the next renewal decides
	}
	if info == nil || info.Owner != l.owner {
		return l.lost("it is gone (expired, force-released or taken)", nil)
	}
	return nil
}

// subscribe watches the lock's keyspace channel (nil when subscribing
// fails: the periodic check then finds a loss alone). Every event but
// lock.acquired and lock.released makes the watcher look: a holder loses
// its lock by an ending event of its own (expired, forced, closed) or by
// the server's own events (del, evicted, ... when those classes are on);
// lock.released is a release by its owner, and another owner's grant
// comes after one of those (or after a DEL, which the check finds). sent
// is when the acquisition was sent, addr the server that granted it.
func (l *Lock) subscribe(sent time.Time, addr string) *keyWatch {
	ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.callTimeout)
	defer cancel()
	w, err := l.c.watchKeyAt(ctx, addr, l.name, sent, func(event string) bool {
		return event != "lock.acquired" && event != "lock.released"
	})
	if err != nil {
		return nil
	}
	return w
}

// checkTied: the KEEPALIVE check. A lock that is gone or held by someone
// else is lost; a lock that lost its tie (failover, restart) is tied again
// when retie (the periodic check; a look at an event only looks).
func (l *Lock) checkTied(t *tenure, retie bool) error {
	t.op.Lock()
	defer t.op.Unlock()
	ln := t.tied()
	if ln == nil || t.ended() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.callTimeout)
	defer cancel()
	replies, err := ln.conn.Do(ctx, l.c.cfg.callTimeout, []interface{}{"LOCK.INFO", l.name})
	if err != nil {
		if !errors.Is(err, wire.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			// Closed under the check (an event announced it first).
			return l.lost("its KEEPALIVE connection closed", err)
		}
		return l.lost("its KEEPALIVE connection failed a check", err)
	}
	if se, ok := replies[0].(wire.ServerError); ok {
		if _, _, moved := redirect(string(se), ln.conn.Addr()); moved {
			_, err := l.follow(ctx, t, l.renewArgs())
			return err
		}
		e := serverError(ln.conn.Addr(), se)
		if errors.Is(e, ErrNotLock) || errors.Is(e, ErrWrongType) {
			return l.lost("its key holds something else now", e)
		}
		return nil // e.g. LOADING: look again next time
	}
	info, err := parseInfo(replies[0])
	if err != nil {
		return nil
	}
	if info == nil || info.Owner != l.owner {
		return l.lost("it is gone (force-released, expired or deleted)", nil)
	}
	if !info.Keepalive && retie {
		replies, err := ln.conn.Do(ctx, l.timeout(-1), l.renewArgs())
		if err != nil {
			return l.lost("its KEEPALIVE connection failed a check", err)
		}
		if n, _ := replies[0].(int64); n != 1 {
			return l.lost("it was gone when re-tied", nil)
		}
	}
	return nil
}

// renewOnce: the watchdog's renewal.
func (l *Lock) renewOnce(t *tenure) error {
	if t.ended() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout(-1))
	defer cancel()
	reply, err := l.onHold(ctx, t, l.renewArgs())
	if err != nil {
		return err
	}
	if n, _ := reply.(int64); n != 1 {
		return l.lost("a renewal found it gone (expired, force-released or taken)", nil)
	}
	return nil
}

// Renew sets the lease from now (and, with KEEPALIVE, ties the lock to the
// Lock's connection again, e.g. after a failover). ErrLockLost if this
// owner does not hold it.
func (l *Lock) Renew(ctx context.Context) error {
	if err := l.bg.settle(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.current()
	if t == nil {
		return l.lost("it is not held by this Lock", nil)
	}
	reply, err := l.onHold(ctx, t, l.renewArgs())
	if err != nil {
		return err
	}
	if n, _ := reply.(int64); n != 1 {
		lost := l.lost("a renewal found it gone (expired, force-released or taken)", nil)
		t.lose(lost)
		l.current()
		return lost
	}
	return nil
}

// Info is LOCK.INFO: nil when the lock is free.
func (l *Lock) Info(ctx context.Context) (*LockInfo, error) {
	reply, ln, err := l.c.call(ctx, l.name, nil, l.c.cfg.callTimeout, []interface{}{"LOCK.INFO", l.name})
	if err != nil {
		return nil, fmt.Errorf("hashlock: lock %q: %w", l.name, err)
	}
	ln.put()
	if se, ok := reply.(wire.ServerError); ok {
		return nil, serverError(ln.conn.Addr(), se)
	}
	return parseInfo(reply)
}

// Release gives this hold back. The last hold's release frees the lock
// (the next waiter gets it) and returns its connection to the pool. A
// release runs to its end even if ctx is cancelled first (Release then
// returns ctx's error and the release finishes in the background; the
// Lock's next operation waits for it). A lost lock returns its
// *LostError; a second Release of the same hold, ErrReleased.
func (h *Hold) Release(ctx context.Context) error {
	if !h.released.CompareAndSwap(false, true) {
		return fmt.Errorf("hashlock: lock %q: this hold was released already: %w", h.l.name, ErrReleased)
	}
	done := make(chan error, 1)
	h.l.bg.spawn(func() { done <- h.l.releaseOne(h) })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("hashlock: lock %q: the release goes on in the background: %w", h.l.name, ctx.Err())
	}
}

func (l *Lock) releaseOne(h *Hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.current()
	if t != h.t {
		if err := h.t.Err(); err != nil && err != ErrReleased {
			return err
		}
		return l.lost("it is not held", nil)
	}
	reply, err := l.onHold(context.Background(), t, l.releaseArgs())
	if err != nil {
		var ce *wire.Error
		if !l.cfg.keepalive && errors.As(err, &ce) {
			h.released.Store(false) // unknown outcome: the caller may try again
		}
		return err
	}
	left, ok := asInt(reply)
	if !ok {
		return unexpected("an integer", reply)
	}
	l.holds.Store(left)
	if left == 0 {
		t.release()
		l.current()
	}
	return nil
}
