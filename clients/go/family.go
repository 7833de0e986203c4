package hashlock

// What the family's holders share (a semaphore Lease, a ReadWriteLock's
// owner, a MultiLock): the grant of a wait tied to its connection, the
// tenure with its watcher (KEEPALIVE: re-tying renewals on the tie;
// watchdog: renewals every check interval; a read-only look at every
// lifecycle event), and the commands sent on the hold's behalf.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hashlock/internal/wire"
)

// holder describes one family object's holds to the shared machinery.
type holder struct {
	c     *Client
	key   string // the key commands are routed by (a multi-lock's first)
	name  string // for errors
	owner string
	cfg   lockConfig
	// renew: commands that renew every hold (keepalive: and tie it to the
	// connection they go on); each answers 1 while held.
	renew func(keepalive bool) [][]interface{}
	// look: a read-only look at the server; a non-empty reason: gone.
	look func(ctx context.Context) (reason string, err error)
	// eventKeys: the keys whose lifecycle events make the watcher look.
	eventKeys []string
	wants     func(event string) bool
}

func (h *holder) lost(reason string, cause error) *LostError {
	return &LostError{Name: h.name, Owner: h.owner, Reason: reason, Err: cause}
}

func (h *holder) withReplicas(args []interface{}) []interface{} {
	if h.cfg.replicasT > 0 {
		args = append(args, "REPLICAS", h.cfg.replicas, ms(h.cfg.replicasT))
	}
	return args
}

// timeout is how long a call may take to answer: 0 = no limit (BLOCK 0).
func (h *holder) timeout(block int64) time.Duration {
	extra := h.cfg.replicasT
	switch {
	case block == 0:
		return 0
	case block > 0:
		return time.Duration(block)*time.Millisecond + extra + responseMargin
	}
	return h.c.cfg.callTimeout + extra
}

// waitCtx turns ctx's deadline into the server's BLOCK (Acquire: wait as
// long as ctx allows).
func waitCtx(ctx context.Context) (wait, error) {
	w := wait{block: 0}
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		if rem <= 0 {
			return w, context.DeadlineExceeded
		}
		w = wait{block: ms(rem), deadline: true}
	}
	return w, nil
}

// waitUpTo is waitCtx bounded by timeout too (<= 0: no wait at all).
func waitUpTo(ctx context.Context, timeout time.Duration) (wait, error) {
	if timeout <= 0 {
		return wait{block: -1}, nil
	}
	w := wait{block: ms(timeout)}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		rem := time.Until(dl)
		if rem <= 0 {
			return w, context.DeadlineExceeded
		}
		w = wait{block: ms(rem), deadline: true}
	}
	return w, nil
}

func notAcquired(what string, w wait) error {
	switch {
	case w.block < 0:
		return fmt.Errorf("hashlock: %s: not available now: %w", what, ErrNotAcquired)
	case w.deadline:
		return fmt.Errorf("hashlock: %s: not acquired before the context's deadline: %w (%w)", what, ErrNotAcquired, context.DeadlineExceeded)
	case w.block > 0:
		return fmt.Errorf("hashlock: %s: not acquired within %d ms: %w", what, w.block, ErrNotAcquired)
	}
	return fmt.Errorf("hashlock: %s: the server ended the wait (CLIENT UNBLOCK?): %w", what, ErrNotAcquired)
}

// grant sends a grant command (args: with KEEPALIVE whenever it waits or
// the holder keeps alive, so that closing the wait's connection gives back
// a grant on its way). A wait ends with ctx: its connection is closed, the
// server drops the waiter, and what may have been granted on it is
// released by the server as the connection closes. A call that does not
// wait is not abandoned. It returns the reply with its link (still taken),
// or nil reply (not granted; link put back), or an error.
func (h *holder) grant(ctx context.Context, b *backlog, what string, w wait, args []interface{}, isGrant func(interface{}) bool) (interface{}, *link, error) {
	if err := b.settle(ctx); err != nil {
		return nil, nil, fmt.Errorf("hashlock: %s: %w", what, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("hashlock: %s: %w", what, err)
	}
	callCtx := ctx
	if w.block < 0 {
		callCtx = context.WithoutCancel(ctx)
	}
	reply, ln, err := h.c.grantCall(callCtx, b, h.key, h.timeout(w.block), args, nil, isGrant)
	if err != nil {
		// The wait's connection was closed: what was granted on it is
		// tied to it, and given back by the server as it drops the
		// connection. Return only once it has.
		var ce *wire.Error
		if errors.As(err, &ce) && ce.Sent {
			h.c.awaitGone(h.key, ce.Addr, ce.ID)
		}
		if errors.Is(err, context.DeadlineExceeded) && w.deadline {
			return nil, nil, fmt.Errorf("hashlock: %s: %w (%w)", what, ErrNotAcquired, err)
		}
		return nil, nil, fmt.Errorf("hashlock: %s: %w", what, err)
	}
	if se, ok := reply.(wire.ServerError); ok {
		ln.put()
		return nil, nil, serverError(ln.conn.Addr(), se)
	}
	if reply == nil {
		ln.put()
		return nil, nil, notAcquired(what, w)
	}
	return reply, ln, nil
}

// begin starts the tenure of a grant that came on ln (tied to it): with
// KEEPALIVE ln becomes the tie; else the holds are untied there (renewal
// commands without KEEPALIVE) and ln goes back to the pool.
func (h *holder) begin(ln *link, tiedWait bool, sent time.Time) (*tenure, error) {
	addr := ln.conn.Addr()
	if h.cfg.keepalive {
		t := newTenure(ln)
		h.startWatch(t, sent, addr)
		return t, nil
	}
	if tiedWait {
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout(-1))
		defer cancel()
		cmds := h.renew(false)
		replies, err := ln.conn.Do(ctx, h.timeout(-1), cmds...)
		if err != nil {
			return nil, h.lost("untying it after the grant failed (the server gave it back as the connection closed)", err)
		}
		for _, r := range replies {
			if n, _ := r.(int64); n != 1 {
				ln.close()
				return nil, h.lost("it was gone right after the grant", nil)
			}
		}
	}
	ln.put()
	t := newTenure(nil)
	h.startWatch(t, sent, addr)
	return t, nil
}

// send sends args for the tenure t: on its tie (KEEPALIVE), else routed.
// It runs to its end whatever ctx does. A failure of the tie loses the
// tenure (the server gave back what was tied). Server errors come back as
// *ServerError; NOTOWNER, WRONGTYPE, NOTSEMAPHORE and NOTLOCK end it as lost.
func (h *holder) send(ctx context.Context, t *tenure, args []interface{}) (interface{}, error) {
	timeout := h.timeout(-1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var reply interface{}
	var addr string
	if h.cfg.keepalive {
		t.op.Lock()
		defer t.op.Unlock()
		ln := t.tied()
		if ln == nil {
			if err := t.Err(); err != nil && err != ErrReleased {
				return nil, err
			}
			return nil, h.lost("it is not held", nil)
		}
		replies, err := ln.conn.Do(ctx, timeout, args)
		if err != nil {
			lost := h.lost("its KEEPALIVE connection failed", err)
			t.lose(lost)
			return nil, lost
		}
		reply, addr = replies[0], ln.conn.Addr()
	} else {
		r, ln, err := h.c.call(ctx, h.key, nil, timeout, args)
		if err != nil {
			return nil, fmt.Errorf("hashlock: %s: %w", h.name, err)
		}
		reply, addr = r, ln.conn.Addr()
		ln.put()
	}
	if se, ok := reply.(wire.ServerError); ok {
		e := serverError(addr, se)
		if errors.Is(e, ErrNotOwner) || errors.Is(e, ErrNotLock) || errors.Is(e, ErrWrongType) || errors.Is(e, ErrNotSemaphore) {
			lost := h.lost("the server says it is not held", e)
			t.lose(lost)
			return nil, lost
		}
		return nil, e
	}
	return reply, nil
}

// renewAll sends every renewal command for t; lost if one answers 0.
func (h *holder) renewAll(ctx context.Context, t *tenure, keepalive bool) error {
	for _, cmd := range h.renew(keepalive) {
		reply, err := h.send(ctx, t, cmd)
		if err != nil {
			return err
		}
		if n, _ := reply.(int64); n != 1 {
			return h.lost("a renewal found it gone (expired, force-released or taken)", nil)
		}
	}
	return nil
}

// startWatch runs t's watcher: KEEPALIVE: the tie's end, and re-tying
// renewals on it every check interval; watchdog: renewals every check
// interval; both: a look at every lifecycle event on the keys.
func (h *holder) startWatch(t *tenure, sent time.Time, addr string) {
	connLost := func(cause error) error { return h.lost("its KEEPALIVE connection closed", cause) }
	var events func(addr string) *keyWatch
	if !h.cfg.noEvents {
		events = func(addr string) *keyWatch { return h.subscribe(sent, addr) }
	}
	look := func() error {
		if t.ended() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.c.cfg.callTimeout)
		defer cancel()
		reason, err := h.look(ctx)
		if err != nil || t.ended() || reason == "" {
			return nil // the periodic check decides
		}
		return h.lost(reason, nil)
	}
	renewed := time.Now()
	check := func() error {
		if t.ended() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout(-1))
		defer cancel()
		started := time.Now()
		err := h.renewAll(ctx, t, h.cfg.keepalive)
		if err == nil {
			renewed = started
			return nil
		}
		if errors.Is(err, ErrLockLost) {
			return err
		}
		var se *ServerError
		if errors.As(err, &se) {
			if se.Code == "MOVED" || se.Code == "ASK" {
				// The family's holds do not follow a slot move (a Lock does).
				return h.lost("its key's slot moved to another node", err)
			}
			if h.cfg.keepalive {
				return nil // e.g. LOADING: look again next time
			}
		} else if h.cfg.keepalive {
			return h.lost("its KEEPALIVE connection failed a check", err)
		}
		if time.Since(renewed) >= h.cfg.lease {
			return h.lost("no renewal succeeded within the lease", err)
		}
		return nil // transient: the next tick tries again
	}
	t.watch(h.cfg.check, check, look, connLost, addr, events)
}

// subscribe watches the keys' keyspace channels on the server at addr (nil
// when it cannot: the periodic check then finds a loss alone).
func (h *holder) subscribe(sent time.Time, addr string) *keyWatch {
	ctx, cancel := context.WithTimeout(context.Background(), h.c.cfg.callTimeout)
	defer cancel()
	var first *keyWatch
	for _, k := range h.eventKeys {
		w, err := h.c.watchKeyAt(ctx, addr, k, sent, h.wants)
		if err != nil {
			first.Close()
			return nil
		}
		if first == nil {
			first = w
		} else {
			first.merge(w)
		}
	}
	return first
}

// simple runs a command that neither waits nor holds, routed by key.
func (c *Client) simple(ctx context.Context, key string, args ...interface{}) (interface{}, error) {
	reply, ln, err := c.call(ctx, key, nil, c.cfg.callTimeout, args)
	if err != nil {
		return nil, fmt.Errorf("hashlock: %s %q: %w", args[0], key, err)
	}
	ln.put()
	if se, ok := reply.(wire.ServerError); ok {
		return nil, serverError(ln.conn.Addr(), se)
	}
	return reply, nil
}

func (c *Client) simpleInt(ctx context.Context, key string, args ...interface{}) (int64, error) {
	reply, err := c.simple(ctx, key, args...)
	if err != nil {
		return 0, err
	}
	n, ok := asInt(reply)
	if !ok {
		return 0, unexpected("an integer", reply)
	}
	return n, nil
}

// fieldMap reads a flat field/value array (the .INFO commands in RESP2).
func fieldMap(v interface{}) (map[string]interface{}, error) {
	if v == nil {
		return nil, nil
	}
	a, ok := v.([]interface{})
	if !ok || len(a)%2 != 0 {
		return nil, unexpected("a field/value array", v)
	}
	m := make(map[string]interface{}, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		k, _ := a[i].(string)
		m[k] = a[i+1]
	}
	return m, nil
}

func intField(m map[string]interface{}, k string) int64 {
	n, _ := asInt(m[k])
	return n
}

func ttlField(m map[string]interface{}, k string) time.Duration {
	n := intField(m, k)
	if n < 0 {
		return -1
	}
	return time.Duration(n) * time.Millisecond
}

// awaitGone waits (up to a few seconds) until the server at addr no longer
// lists client id: then whatever was tied to that connection has been
// given back. Without an id or the right to CLIENT LIST it returns at once.
func (c *Client) awaitGone(key, addr string, id int64) {
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.poolForAddr(ctx, key, addr)
	if err != nil {
		return
	}
	delay := 200 * time.Microsecond
	for ctx.Err() == nil {
		conn, err := p.Get(ctx)
		if err != nil {
			return
		}
		replies, err := conn.Do(ctx, c.cfg.callTimeout, []interface{}{"CLIENT", "LIST", "ID", id})
		if err != nil {
			return
		}
		p.Put(conn)
		list, isStr := replies[0].(string)
		if !isStr || list == "" {
			return // gone (or no right to ask)
		}
		pause(ctx, delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}
