package wire

import (
	"context"
	"sync"
	"sync/atomic"
)

// Pool keeps idle connections to one server for reuse. A connection comes
// back with Put only when it holds nothing on the server (its lock was
// released cleanly, its wait was answered); a connection whose state is
// unknown (a cancelled or timed-out call) is closed instead, never put back.
type Pool struct {
	settings Settings
	maxIdle  int

	mu     sync.Mutex
	idle   []*Conn // most recently used last
	closed bool

	dials atomic.Uint64
}

// NewPool: at most maxIdle idle connections are kept (the rest are closed
// when put back).
func NewPool(s Settings, maxIdle int) *Pool {
	return &Pool{settings: s, maxIdle: maxIdle}
}

// Settings are the pool's connection settings.
func (p *Pool) Settings() Settings { return p.settings }

// Get returns an idle live connection, or dials a new one.
func (p *Pool) Get(ctx context.Context) (*Conn, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if c.Alive() {
			p.mu.Unlock()
			return c, nil
		}
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, &Error{Addr: p.settings.Addr, Err: ErrClosed}
	}
	c, err := Dial(ctx, p.settings)
	if err != nil {
		return nil, err
	}
	p.dials.Add(1)
	return c, nil
}

// Put gives a connection back for reuse (closed if dead, if the pool is
// full or closed).
func (p *Pool) Put(c *Conn) {
	if c == nil {
		return
	}
	if !c.Alive() {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		c.Close()
		return
	}
	// Drop idle connections that died meanwhile (e.g. the server's
	// `timeout` closed them).
	live := p.idle[:0]
	for _, ic := range p.idle {
		if ic.Alive() {
			live = append(live, ic)
		} else {
			ic.Close()
		}
	}
	p.idle = append(live, c)
	p.mu.Unlock()
}

// Close closes the idle connections; connections in use are closed when
// they are put back.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = true
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// Stats: connections dialed so far, and idle now.
func (p *Pool) Stats() (dials uint64, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials.Load(), len(p.idle)
}
