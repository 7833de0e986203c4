package hashlock

// The pieces every primitive that holds something shares (the lock now;
// semaphores, latches, read-write locks, multi-locks and elections later):
// a tenure with its loss signal and watcher, the backlog of background
// work that the next operation waits for, and the give-back of a grant that
// may have reached a call that was abandoned.

import (
	"context"
	"errors"
	"sync"
	"time"

	"hashlock/internal/wire"
)

// giveBackTimeout bounds the background give-back of an abandoned grant.
const giveBackTimeout = 10 * time.Second

// tenure is one holding period: from the grant to the last release or the
// loss. It owns the connection the hold is tied to (KEEPALIVE), if any, and
// its done channel is the loss signal.
//
// Loss is seen three ways: the tied connection's reader sees it close or
// fail at once; a lifecycle keyspace event on the key (lock.forced,
// lock.expired, ...: events.go) makes the watcher look at once; and a
// periodic check (the caller's function: a renewal, or a look at the lock)
// finds what no event announced (a DEL when the server sends only class d
// events, a failover).
type tenure struct {
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	err     error
	ln      *link
	changed chan struct{} // closed when ln is replaced

	// op serialises the commands sent on ln (the user's and the checks').
	op sync.Mutex
}

func newTenure(ln *link) *tenure {
	return &tenure{done: make(chan struct{}), ln: ln, changed: make(chan struct{})}
}

// Done is closed when the tenure ends (released or lost).
func (t *tenure) Done() <-chan struct{} { return t.done }

// Err is nil while held, ErrReleased after a clean release, the loss (a
// *LostError) otherwise.
func (t *tenure) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *tenure) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// tied is the connection the hold is tied to (nil: none).
func (t *tenure) tied() *link {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ln
}

// retie makes ln the tied connection; the previous one is closed (it may
// hold a stale tie).
func (t *tenure) retie(ln *link) {
	t.mu.Lock()
	old := t.ln
	if t.err != nil {
		t.mu.Unlock()
		ln.close()
		return
	}
	t.ln = ln
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	if old != nil && old != ln {
		old.close()
	}
}

// release ends the tenure cleanly: the tied connection holds nothing now
// and goes back to its pool.
func (t *tenure) release() { t.finish(ErrReleased, false) }

// lose ends the tenure with a loss; the tied connection is closed.
func (t *tenure) lose(err error) { t.finish(err, true) }

func (t *tenure) finish(err error, closeConn bool) {
	t.once.Do(func() {
		t.mu.Lock()
		t.err = err
		ln := t.ln
		t.ln = nil
		t.mu.Unlock()
		close(t.done)
		if ln == nil {
			return
		}
		if closeConn {
			ln.close()
		} else {
			ln.put()
		}
	})
}

// watch starts the watcher: it ends the tenure as lost when the tied
// connection dies (connLost builds the error), when check, called every
// interval, returns an error, or when look, called whenever a lifecycle
// event arrives on the key, does. events, if not nil, subscribes to the
// key's events on the server at addr (it may block; it runs beside the
// watcher, and returns nil when it cannot); when the tie moves to another
// server (the key's slot moved), the subscription moves with it.
func (t *tenure) watch(interval time.Duration, check, look func() error, connLost func(cause error) error,
	addr string, events func(addr string) *keyWatch) {
	var subscribed chan *keyWatch
	subscribe := func(at string) {
		ch := make(chan *keyWatch, 1)
		subscribed = ch
		go func() { ch <- events(at) }()
	}
	if events != nil {
		subscribe(addr)
	}
	go func() {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		var kicks <-chan struct{}
		var w *keyWatch
		defer func() {
			if w != nil {
				w.Close()
			} else if subscribed != nil {
				// Still subscribing: close the watcher when it comes.
				go func() {
					if late := <-subscribed; late != nil {
						late.Close()
					}
				}()
			}
		}()
		for {
			t.mu.Lock()
			ln, changed := t.ln, t.changed
			t.mu.Unlock()
			var connDone <-chan struct{}
			if ln != nil {
				connDone = ln.conn.Done()
			}
			select {
			case <-t.done:
				return
			case <-changed:
				if nl := t.tied(); events != nil && nl != nil && nl.conn.Addr() != addr && subscribed == nil {
					// Tied on another server now: its events come from there.
					addr = nl.conn.Addr()
					if w != nil {
						w.Close()
						w, kicks = nil, nil
					}
					subscribe(addr)
				}
			case <-connDone:
				if t.tied() == ln {
					t.lose(connLost(ln.conn.Err()))
				}
			case w = <-subscribed:
				subscribed = nil
				if w != nil {
					kicks = w.Kicks()
				}
			case <-kicks:
				if err := look(); err != nil {
					t.lose(err)
				}
			case <-ticker.C:
				if err := check(); err != nil {
					t.lose(err)
				}
			}
		}
	}()
}

// backlog is background work of an object (a release finishing after its
// caller gave up, the give-back of an abandoned grant) that the object's
// next operation waits for, so that it cannot undo a hold taken after it.
type backlog struct {
	mu      sync.Mutex
	pending []chan struct{}
}

func (b *backlog) spawn(f func()) {
	ch := make(chan struct{})
	b.mu.Lock()
	b.pending = append(b.pending, ch)
	b.mu.Unlock()
	go func() {
		defer close(ch)
		f()
	}()
}

// settle waits for the background work started so far.
func (b *backlog) settle(ctx context.Context) error {
	b.mu.Lock()
	pending := append([]chan struct{}(nil), b.pending...)
	b.mu.Unlock()
	for _, ch := range pending {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	live := b.pending[:0]
	for _, ch := range b.pending {
		select {
		case <-ch:
		default:
			live = append(live, ch)
		}
	}
	b.pending = live
	b.mu.Unlock()
	return nil
}

// grantCall runs a call that may wait in a server queue (BLOCK) and may
// grant something (args), on a pooled connection to key's server. If ctx
// ends first, its connection is closed, so the server forgets the waiter
// with it. A grant that may have been made anyway is given back at once:
// with undo == nil the grant is tied to the connection (KEEPALIVE) and the
// server releases it as the connection closes; otherwise undo (e.g.
// LOCK.RELEASE key owner) is sent in the background once the server has
// dropped that connection (giveBack). A grant that arrives when ctx has
// already ended is given back the same way. b is the object's backlog: its
// next operation waits for the give-back, so that it cannot undo a grant
// made after it.
//
// It returns the reply with its link (still taken: the caller keeps it,
// puts it back or closes it), or an error; isGrant tells a grant from
// other replies.
func (c *Client) grantCall(ctx context.Context, b *backlog, key string, timeout time.Duration,
	args, undo []interface{}, isGrant func(reply interface{}) bool) (interface{}, *link, error) {
	reply, ln, err := c.call(ctx, key, nil, timeout, args)
	if err != nil {
		var ce *wire.Error
		if errors.As(err, &ce) && ce.Sent && undo != nil {
			addr, id := ce.Addr, ce.ID
			b.spawn(func() { c.giveBack(key, addr, id, undo) })
		}
		return nil, nil, err
	}
	if ctx.Err() != nil && isGrant(reply) {
		if undo == nil {
			ln.close()
		} else {
			b.spawn(func() {
				bg, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
				defer cancel()
				if _, err := ln.conn.Do(bg, c.cfg.callTimeout, undo); err == nil {
					ln.put()
				}
			})
		}
		return nil, nil, &wire.Error{Addr: ln.conn.Addr(), ID: ln.conn.ID(), Sent: true, Err: ctx.Err()}
	}
	return reply, ln, nil
}

// giveBack sends undo to addr once the server no longer lists client id
// (it is sent on every round meanwhile too: it is harmless when there is
// nothing to undo, and gives a delivered grant back sooner). Without the
// connection's id or the right to CLIENT LIST, it sends undo up to five
// times over about 300 ms, and stops when undo gives a grant back.
func (c *Client) giveBack(key, addr string, id int64, undo []interface{}) {
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	p, err := c.poolForAddr(ctx, key, addr)
	if err != nil {
		return
	}
	delay := time.Millisecond
	blind := 0
	for ctx.Err() == nil {
		conn, err := p.Get(ctx)
		if err == nil {
			cmds := [][]interface{}{{"CLIENT", "LIST", "ID", id}, undo}
			if id == 0 { // no CLIENT ID for it: blind
				cmds = [][]interface{}{{"PING"}, undo}
			}
			var replies []interface{}
			replies, err = conn.Do(ctx, c.cfg.callTimeout, cmds...)
			if err == nil {
				p.Put(conn)
				list, isStr := replies[0].(string)
				if id != 0 && isStr && list == "" {
					return // the server dropped the connection before undo ran
				}
				if id == 0 || !isStr { // no right to CLIENT LIST: blind
					if _, undone := replies[1].(int64); undone {
						return // there was a grant, and it is given back
					}
					if blind++; blind >= 5 {
						return
					}
					pause(ctx, 10*time.Millisecond<<blind) // 20 ms ... 160 ms
					continue
				}
			}
		}
		pause(ctx, delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
