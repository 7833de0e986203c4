package hashlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hashlock/internal/wire"
)

// Latch is a count-down latch on one key (LATCH.*), shared with Redisson's
// RCountDownLatch on the same name: Create arms it, CountDown counts down,
// Wait waits until it is open (the key absent, or its count 0 or less).
// A wait queues in the server on a connection of its own and is answered
// the moment the latch opens, whatever opens it (a count-down by anyone,
// DEL, expiry); cancelling ctx closes that connection.
type Latch struct {
	c    *Client
	name string
}

// NewLatch returns the latch on key name.
func (c *Client) NewLatch(name string) *Latch { return &Latch{c: c, name: name} }

// Name is the latch's key.
func (l *Latch) Name() string { return l.name }

// Create sets the count (>= 1) if no latch exists (true); else changes
// nothing (false). Redisson's trySetCount.
func (l *Latch) Create(ctx context.Context, count int64) (bool, error) {
	n, err := l.c.simpleInt(ctx, l.name, "LATCH.CREATE", l.name, count)
	return n == 1, err
}

// CountDown counts down once and returns the count left (0: open, every
// waiter answered).
func (l *Latch) CountDown(ctx context.Context) (int64, error) {
	return l.c.simpleInt(ctx, l.name, "LATCH.COUNTDOWN", l.name)
}

// Count is the count (0 when open).
func (l *Latch) Count(ctx context.Context) (int64, error) {
	return l.c.simpleInt(ctx, l.name, "LATCH.COUNT", l.name)
}

// Wait waits until the latch is open, as long as ctx allows: nil once it
// is open; ctx's error (context.DeadlineExceeded at its deadline, which
// becomes the server's BLOCK; context.Canceled) otherwise.
func (l *Latch) Wait(ctx context.Context) error {
	w, err := waitCtx(ctx)
	if err != nil {
		return fmt.Errorf("hashlock: latch %q: %w", l.name, err)
	}
	for {
		open, err := l.wait(ctx, w)
		if err != nil || open {
			return err
		}
		if w.deadline {
			return fmt.Errorf("hashlock: latch %q: not open before the context's deadline: %w", l.name, context.DeadlineExceeded)
		}
		// nil from BLOCK 0: the server ended the wait (CLIENT UNBLOCK); wait again
	}
}

// WaitTimeout waits up to timeout for the latch to open: true if it is
// open, false if the time ran out (timeout <= 0: looks once).
func (l *Latch) WaitTimeout(ctx context.Context, timeout time.Duration) (bool, error) {
	w, err := waitUpTo(ctx, timeout)
	if err != nil {
		return false, fmt.Errorf("hashlock: latch %q: %w", l.name, err)
	}
	return l.wait(ctx, w)
}

func (l *Latch) wait(ctx context.Context, w wait) (bool, error) {
	args := []interface{}{"LATCH.AWAIT", l.name}
	if w.block < 0 {
		reply, err := l.c.simple(ctx, l.name, args...)
		return reply != nil, err
	}
	args = append(args, "BLOCK", w.block)
	timeout := time.Duration(0)
	if w.block > 0 {
		timeout = time.Duration(w.block)*time.Millisecond + responseMargin
	}
	reply, ln, err := l.c.call(ctx, l.name, nil, timeout, args)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && w.deadline {
			return false, nil
		}
		return false, fmt.Errorf("hashlock: latch %q: %w", l.name, err)
	}
	ln.put()
	if se, ok := reply.(wire.ServerError); ok {
		return false, serverError(ln.conn.Addr(), se)
	}
	return reply != nil, nil
}
