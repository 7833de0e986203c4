package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed: the connection was closed by this side (Close).
var ErrClosed = errors.New("connection closed by the client")

// ErrTimeout: no reply within the call's timeout (the connection was then
// closed).
var ErrTimeout = errors.New("no reply in time")

var errUnsolicited = errors.New("wire: a reply nobody asked for")

// writeTimeout bounds writing a command into the socket.
const writeTimeout = 5 * time.Second

// maxPipeline is the most commands one Do may send together.
const maxPipeline = 8

// Error is a failure of the connection itself (not a server error reply).
// Sent reports whether the commands were written: if so the server may
// have acted on them although their replies never arrived.
type Error struct {
	Addr string
	// ID is the server's CLIENT ID of the connection (0 if it never got
	// one).
	ID   int64
	Sent bool
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("hashlock: connection to %s: %v", e.Addr, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Settings say how to open and prepare a connection.
type Settings struct {
	Addr string
	// Dial opens the socket (TLS included); required.
	Dial func(ctx context.Context) (net.Conn, error)
	// Credentials returns the user name and password to AUTH with (both
	// empty: no AUTH). May be nil.
	Credentials func(ctx context.Context) (user, pass string, err error)
	DB          int
	ClientName  string
	// Handshake bounds dialing and the handshake when ctx has no earlier
	// deadline.
	Handshake time.Duration
}

// Conn is one socket to one server.
type Conn struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
	id   int64

	mu      sync.Mutex // one Do at a time
	buf     []byte
	expect  atomic.Int64 // replies the reader may still deliver
	replies chan interface{}

	// push, when set, receives the pub/sub messages ("message" arrays) of
	// a connection in subscribe mode; they are not replies to a command.
	push atomic.Pointer[func(channel, payload string)]

	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	done      chan struct{} // closed when the reader stopped: the connection is dead
	errMu     sync.Mutex
	err       error
}

// Dial opens a connection and runs the handshake (AUTH, SELECT, CLIENT
// SETNAME, CLIENT ID, pipelined in one round trip).
func Dial(ctx context.Context, s Settings) (*Conn, error) {
	if s.Handshake > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Handshake)
		defer cancel()
	}
	nc, err := s.Dial(ctx)
	if err != nil {
		return nil, &Error{Addr: s.Addr, Err: err}
	}
	c := &Conn{
		addr:    s.Addr,
		nc:      nc,
		br:      bufio.NewReaderSize(nc, 4096),
		replies: make(chan interface{}, maxPipeline),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	var cmds [][]interface{}
	if s.Credentials != nil {
		user, pass, err := s.Credentials(ctx)
		if err != nil {
			c.Close()
			return nil, &Error{Addr: s.Addr, Err: fmt.Errorf("credentials: %w", err)}
		}
		switch {
		case user != "" && pass != "":
			cmds = append(cmds, []interface{}{"AUTH", user, pass})
		case pass != "":
			cmds = append(cmds, []interface{}{"AUTH", pass})
		}
	}
	if s.DB != 0 {
		cmds = append(cmds, []interface{}{"SELECT", s.DB})
	}
	if s.ClientName != "" {
		cmds = append(cmds, []interface{}{"CLIENT", "SETNAME", s.ClientName})
	}
	cmds = append(cmds, []interface{}{"CLIENT", "ID"})
	replies, err := c.Do(ctx, 0, cmds...)
	if err != nil {
		c.Close()
		return nil, err
	}
	// CLIENT ID may be refused (an ACL user without CLIENT): the id is then
	// 0, which only makes a give-back blind (see giveBack).
	for i, r := range replies[:len(replies)-1] {
		if e, ok := r.(ServerError); ok {
			c.Close()
			return nil, fmt.Errorf("hashlock: connection to %s: %s: %w", s.Addr, cmds[i][0], e)
		}
	}
	c.id, _ = replies[len(replies)-1].(int64)
	return c, nil
}

// Addr is the server address the connection was opened to.
func (c *Conn) Addr() string { return c.addr }

// ID is the server's CLIENT ID of this connection.
func (c *Conn) ID() int64 { return c.id }

// Done is closed when the connection is dead: closed by either side, reset,
// or failed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection died (nil while it is alive).
func (c *Conn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Alive reports whether the connection is still open.
func (c *Conn) Alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Close closes the socket now; a Do in progress fails at once.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.setErr(ErrClosed)
		close(c.closing)
		_ = c.nc.Close()
	})
}

func (c *Conn) setErr(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

func (c *Conn) readLoop() {
	defer close(c.done)
	for {
		v, err := readValue(c.br)
		if err != nil {
			c.setErr(err)
			c.Close()
			return
		}
		if h := c.push.Load(); h != nil {
			if ch, payload, ok := message(v); ok {
				(*h)(ch, payload)
				continue
			}
		}
		if c.expect.Add(-1) < 0 {
			c.setErr(errUnsolicited)
			c.Close()
			return
		}
		select {
		case c.replies <- v:
		case <-c.closing:
			return
		}
	}
}

// OnPush makes c a subscriber connection: from now on the pub/sub
// messages it receives (["message", channel, payload]) go to h, called
// from the connection's reader (it must not block), instead of being taken
// for replies. SUBSCRIBE/UNSUBSCRIBE confirmations and PING stay replies
// (one per channel), so Do still sends those commands and waits for them.
func (c *Conn) OnPush(h func(channel, payload string)) { c.push.Store(&h) }

// message recognises a pub/sub message.
func message(v interface{}) (channel, payload string, ok bool) {
	a, isArr := v.([]interface{})
	if !isArr || len(a) != 3 {
		return "", "", false
	}
	if kind, _ := a[0].(string); kind != "message" && kind != "smessage" {
		return "", "", false
	}
	channel, ok1 := a[1].(string)
	payload, ok2 := a[2].(string)
	return channel, payload, ok1 && ok2
}

// Do writes the commands in one go and returns their replies in order
// (server errors as ServerError values). timeout <= 0 means none. If ctx
// ends or the timeout passes first, the connection is closed (a waiting
// command leaves the server's queue with it) and an *Error is returned.
func (c *Conn) Do(ctx context.Context, timeout time.Duration, cmds ...[]interface{}) ([]interface{}, error) {
	if len(cmds) == 0 || len(cmds) > maxPipeline {
		return nil, fmt.Errorf("wire: %d commands in one Do", len(cmds))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.Alive() {
		return nil, &Error{Addr: c.addr, ID: c.id, Err: c.deadErr()}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Addr: c.addr, ID: c.id, Err: err}
	}
	c.buf = c.buf[:0]
	for _, cmd := range cmds {
		c.buf = appendCommand(c.buf, cmd)
	}
	c.expect.Add(int64(len(cmds)))
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(c.buf); err != nil {
		c.setErr(err)
		c.Close()
		// A partial write may have reached the server.
		return nil, &Error{Addr: c.addr, ID: c.id, Sent: true, Err: err}
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	out := make([]interface{}, 0, len(cmds))
	for len(out) < len(cmds) {
		select {
		case v := <-c.replies:
			out = append(out, v)
		case <-c.done:
			// The reader may have queued replies before it stopped.
			select {
			case v := <-c.replies:
				out = append(out, v)
				continue
			default:
			}
			return nil, &Error{Addr: c.addr, ID: c.id, Sent: true, Err: c.deadErr()}
		case <-ctx.Done():
			c.Close()
			return nil, &Error{Addr: c.addr, ID: c.id, Sent: true, Err: ctx.Err()}
		case <-expired:
			c.setErr(ErrTimeout)
			c.Close()
			return nil, &Error{Addr: c.addr, ID: c.id, Sent: true, Err: ErrTimeout}
		}
	}
	return out, nil
}

func (c *Conn) deadErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}
