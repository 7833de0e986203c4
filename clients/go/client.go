package hashlock

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/auth"

	"hashlock/internal/wire"
)

const (
	// DefaultCallTimeout bounds a call that does not wait in a queue.
	DefaultCallTimeout = 5 * time.Second
	// DefaultMaxIdleConns is how many idle connections per server the
	// Client keeps for reuse.
	DefaultMaxIdleConns = 64
	// responseMargin: how much longer than BLOCK (plus any REPLICAS wait)
	// a waiter's connection waits for the server's answer. The server
	// answers at BLOCK's end itself; this only guards against a server
	// that stopped answering.
	responseMargin = 10 * time.Second
	// maxRedirects: MOVED/ASK followed for one call.
	maxRedirects = 5
)

// Client gives the lock objects of one go-redis client their connections.
//
// Every LOCK.* call runs on a connection the Client owns, taken from a pool
// per server: a wait needs a connection of its own (go-redis would cut it
// with its read timeout and retry it at the back of the queue, and cannot
// abandon it when a context is cancelled), and a KEEPALIVE lock lives
// exactly as long as the connection that took it. A connection goes back to
// the pool when it holds nothing on the server (its lock was released
// cleanly, its wait was answered); a cancelled or timed-out call closes its
// connection instead, so the server forgets the waiter. In steady state no
// acquisition opens a new connection.
//
// The go-redis client provides the addresses, the dialer (TLS included),
// the credentials, the database and, for a ClusterClient, the slot map.
// Client is safe for concurrent use.
type Client struct {
	single  *redis.Client
	cluster *redis.ClusterClient
	cfg     clientConfig

	mu       sync.Mutex
	pools    map[string]*wire.Pool
	template *redis.Options // cluster: a node's options, for redirect targets
	closed   bool

	// hub: the subscriber connections for lifecycle events (events.go).
	hub *hub
}

type clientConfig struct {
	callTimeout time.Duration
	maxIdle     int
}

// ClientOption configures New.
type ClientOption func(*clientConfig)

// WithCallTimeout bounds the calls that do not wait in a queue (default
// DefaultCallTimeout). A call that times out closes its connection.
func WithCallTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		if d > 0 {
			c.callTimeout = d
		}
	}
}

// WithMaxIdleConns sets how many idle connections per server are kept for
// reuse (default DefaultMaxIdleConns). Locks held with KEEPALIVE keep their
// connection while held, on top of these.
func WithMaxIdleConns(n int) ClientOption {
	return func(c *clientConfig) {
		if n >= 0 {
			c.maxIdle = n
		}
	}
}

// New wraps a go-redis client: a *redis.Client (standalone, or failover
// from redis.NewFailoverClient) or a *redis.ClusterClient (as
// redis.NewUniversalClient returns them). Close the hashlock Client before
// the go-redis one.
func New(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	c := &Client{
		cfg:   clientConfig{callTimeout: DefaultCallTimeout, maxIdle: DefaultMaxIdleConns},
		pools: map[string]*wire.Pool{},
		hub:   newHub(),
	}
	for _, o := range opts {
		o(&c.cfg)
	}
	switch r := rdb.(type) {
	case *redis.Client:
		c.single = r
	case *redis.ClusterClient:
		c.cluster = r
	}
	return c
}

// Close closes the idle connections and the subscriber connections
// (observers and holds then learn of losses by their checks only; an
// election's Observe channel closes). Locks still held keep their
// connections until they are released (a KEEPALIVE lock is released by the
// server when its connection closes).
func (c *Client) Close() error {
	c.mu.Lock()
	pools := c.pools
	c.pools = map[string]*wire.Pool{}
	c.closed = true
	c.mu.Unlock()
	c.hub.close()
	for _, p := range pools {
		p.Close()
	}
	return nil
}

// Stats counts the Client's connections.
type Stats struct {
	// Dials: connections opened so far, over all servers.
	Dials uint64
	// Idle: connections waiting in the pools for reuse now.
	Idle int
}

// Stats reports the connections opened so far and idle now.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	pools := make([]*wire.Pool, 0, len(c.pools))
	for _, p := range c.pools {
		pools = append(pools, p)
	}
	c.mu.Unlock()
	var s Stats
	for _, p := range pools {
		d, i := p.Stats()
		s.Dials += d
		s.Idle += i
	}
	return s
}

// poolForKey is the pool of the server that serves key (for a cluster: the
// primary of the key's slot, as the go-redis ClusterClient sees it).
func (c *Client) poolForKey(ctx context.Context, key string) (*wire.Pool, error) {
	switch {
	case c.single != nil:
		o := c.single.Options()
		return c.pool(o, o.Addr)
	case c.cluster != nil:
		node, err := c.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		o := node.Options()
		c.mu.Lock()
		c.template = o
		c.mu.Unlock()
		return c.pool(o, o.Addr)
	}
	return nil, ErrUnsupportedClient
}

// poolForAddr is the pool of a server named by a redirect.
func (c *Client) poolForAddr(ctx context.Context, key, addr string) (*wire.Pool, error) {
	c.mu.Lock()
	p := c.pools[addr]
	o := c.template
	c.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if o == nil {
		if c.single != nil {
			o = c.single.Options()
		} else if _, err := c.poolForKey(ctx, key); err != nil {
			return nil, err
		} else {
			c.mu.Lock()
			o = c.template
			c.mu.Unlock()
		}
	}
	return c.pool(o, addr)
}

func (c *Client) pool(o *redis.Options, addr string) (*wire.Pool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p := c.pools[addr]; p != nil {
		return p, nil
	}
	p := wire.NewPool(settings(o, addr, c.cfg.callTimeout), c.cfg.maxIdle)
	c.pools[addr] = p
	return p, nil
}

// settings: how to open a connection to addr like go-redis would (its
// dialer, credentials, database, client name).
func settings(o *redis.Options, addr string, callTimeout time.Duration) wire.Settings {
	network := o.Network
	if network == "" {
		network = "tcp"
	}
	dialer := o.Dialer
	dialTimeout := o.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = 5 * time.Second
	}
	s := wire.Settings{
		Addr: addr,
		Dial: func(ctx context.Context) (net.Conn, error) {
			if dialer != nil {
				return dialer(ctx, network, addr)
			}
			d := net.Dialer{Timeout: dialTimeout, KeepAlive: 5 * time.Minute}
			return d.DialContext(ctx, network, addr)
		},
		DB:         o.DB,
		ClientName: o.ClientName,
		Handshake:  dialTimeout + callTimeout,
	}
	switch {
	case o.StreamingCredentialsProvider != nil:
		p := o.StreamingCredentialsProvider
		s.Credentials = func(context.Context) (string, string, error) {
			creds, unsubscribe, err := p.Subscribe(ignoreCredentials{})
			if err != nil {
				return "", "", err
			}
			if unsubscribe != nil {
				_ = unsubscribe()
			}
			u, pw := creds.BasicAuth()
			return u, pw, nil
		}
	case o.CredentialsProviderContext != nil:
		s.Credentials = o.CredentialsProviderContext
	case o.CredentialsProvider != nil:
		p := o.CredentialsProvider
		s.Credentials = func(context.Context) (string, string, error) {
			u, pw := p()
			return u, pw, nil
		}
	case o.Username != "" || o.Password != "":
		u, pw := o.Username, o.Password
		s.Credentials = func(context.Context) (string, string, error) { return u, pw, nil }
	}
	return s
}

type ignoreCredentials struct{}

func (ignoreCredentials) OnNext(auth.Credentials) {}
func (ignoreCredentials) OnError(error)           {}

// link is a connection taken from a pool.
type link struct {
	conn *wire.Conn
	pool *wire.Pool
}

// put gives the connection back for reuse.
func (l *link) put() {
	if l != nil {
		l.pool.Put(l.conn)
	}
}

// close closes the connection (whatever it was doing on the server ends
// with it).
func (l *link) close() {
	if l != nil {
		l.conn.Close()
	}
}

// call sends args for key and follows MOVED/ASK. It runs on ln if given,
// else on a connection from the key's pool. It returns the reply and the
// link it came on, still taken: the caller puts it back, closes it or
// keeps it. A server error reply is returned as the reply (a
// wire.ServerError), not as err. On err (a *ConnError, or a failure to get
// a connection) no link is returned: a connection that failed was closed.
func (c *Client) call(ctx context.Context, key string, ln *link, timeout time.Duration, args []interface{}) (interface{}, *link, error) {
	asking := false
	for redirects := 0; ; redirects++ {
		if ln == nil {
			p, err := c.poolForKey(ctx, key)
			if err != nil {
				return nil, nil, err
			}
			conn, err := p.Get(ctx)
			if err != nil {
				return nil, nil, err
			}
			ln = &link{conn: conn, pool: p}
		}
		cmds := [][]interface{}{args}
		if asking {
			cmds = [][]interface{}{{"ASKING"}, args}
		}
		replies, err := ln.conn.Do(ctx, timeout, cmds...)
		if err != nil {
			ln.close()
			return nil, nil, err
		}
		reply := replies[len(replies)-1]
		se, isErr := reply.(wire.ServerError)
		if isErr && strings.HasPrefix(string(se), "READONLY") {
			// A primary that became a replica: a new connection may reach
			// the new primary (a failover client's dialer resolves it).
			ln.close()
		}
		if !isErr || redirects >= maxRedirects {
			return reply, ln, nil
		}
		kind, addr, ok := redirect(string(se), ln.conn.Addr())
		if !ok {
			return reply, ln, nil
		}
		ln.put()
		ln = nil
		if kind == "MOVED" && c.cluster != nil {
			c.cluster.ReloadState(ctx)
		}
		p, err := c.poolForAddr(ctx, key, addr)
		if err != nil {
			return nil, nil, err
		}
		conn, err := p.Get(ctx)
		if err != nil {
			return nil, nil, err
		}
		ln = &link{conn: conn, pool: p}
		asking = kind == "ASK"
	}
}

// redirect parses "MOVED <slot> <host:port>" / "ASK <slot> <host:port>".
// An empty host means the host of the server that answered.
func redirect(reply, from string) (kind, addr string, ok bool) {
	f := strings.Fields(reply)
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return "", "", false
	}
	addr = f[2]
	if strings.HasPrefix(addr, ":") {
		if host, _, err := net.SplitHostPort(from); err == nil {
			addr = net.JoinHostPort(host, addr[1:])
		}
	}
	return f[0], addr, true
}
