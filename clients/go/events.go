package hashlock

// Lifecycle keyspace events: the module fires lock.acquired, lock.released,
// lock.expired, lock.forced and lock.closed on __keyspace@<db>__:<key> at
// every change of holder (class d). Holds and elections subscribe to their
// key's channel and look again (LOCK.INFO) when something arrives, so a
// holder learns of a forced release or an expiry, and an observer of a new
// leader, as it happens, without polling.
//
// One subscriber connection per server carries every subscription of the
// Client; a key's channel is subscribed while a watcher wants it, and
// lingers a while after (taking the same lock again then costs nothing:
// no SUBSCRIBE, no extra look). A server without the events sends nothing
// on the channels; holds then rely on their periodic check, and elections
// refuse to start (EventsOffError).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"hashlock/internal/wire"
)

const (
	// subscriberPing: how often the subscriber connection is pinged (so a
	// silent network is noticed and the subscriptions are made again) and
	// lingering channels are swept.
	subscriberPing = 5 * time.Second
	// linger: how long a channel stays subscribed after its last watcher
	// left, so that taking the same lock again costs no SUBSCRIBE.
	linger = 30 * time.Second
)

// ErrEventsOff: the server does not send the module's keyspace events
// (notify-keyspace-events lacks K or E, or d or A). Elections need them;
// the error (an *EventsOffError) says what to set.
var ErrEventsOff = errors.New("hashlock: the server does not send lifecycle keyspace events")

// EventsOffError says that a server's notify-keyspace-events does not
// include the module's events, and what to set instead. It matches
// ErrEventsOff.
type EventsOffError struct {
	// Addr is the server; Flags its notify-keyspace-events now; Want what
	// it should be (the current flags with K and d added).
	Addr, Flags, Want string
}

func (e *EventsOffError) Error() string {
	return fmt.Sprintf("hashlock: the server at %s has notify-keyspace-events %q, without the module's lifecycle events "+
		"(they need K or E, and d or A): run CONFIG SET notify-keyspace-events %s (in redis.conf: notify-keyspace-events %s)",
		e.Addr, e.Flags, e.Want, e.Want)
}

// Is matches ErrEventsOff.
func (e *EventsOffError) Is(target error) bool { return target == ErrEventsOff }

// hearsEvents: K or E (where events go), and d or A (module events).
func hearsEvents(flags string) bool {
	return strings.ContainsAny(flags, "KE") && strings.ContainsAny(flags, "dA")
}

// wantFlags is flags with what is missing added.
func wantFlags(flags string) string {
	w := flags
	if !strings.ContainsAny(w, "KE") {
		w = "K" + w
	}
	if !strings.ContainsAny(w, "dA") {
		w += "d"
	}
	return w
}

// eventsState: what a server's notify-keyspace-events says, as read at a
// time.
type eventsState struct {
	known bool // false: the server would not say (CONFIG refused)
	on    bool
	flags string
	addr  string
}

// readEvents reads notify-keyspace-events on the server of key.
func (c *Client) readEvents(ctx context.Context, key string) (eventsState, error) {
	reply, ln, err := c.call(ctx, key, nil, c.cfg.callTimeout, []interface{}{"CONFIG", "GET", "notify-keyspace-events"})
	if err != nil {
		return eventsState{}, err
	}
	addr := ln.conn.Addr()
	ln.put()
	a, ok := reply.([]interface{})
	if !ok || len(a) != 2 {
		return eventsState{addr: addr}, nil // refused (NOPERM, renamed CONFIG): unknown
	}
	flags, _ := a[1].(string)
	return eventsState{known: true, on: hearsEvents(flags), flags: flags, addr: addr}, nil
}

// requireEvents fails with an *EventsOffError when key's server does not
// send the module's events.
func (c *Client) requireEvents(ctx context.Context, key string) error {
	st, err := c.readEvents(ctx, key)
	if err != nil {
		return err
	}
	if st.known && !st.on {
		return &EventsOffError{Addr: st.addr, Flags: st.flags, Want: wantFlags(st.flags)}
	}
	return nil
}

// channelOf is the keyspace channel of key in database db.
func channelOf(db int, key string) string {
	return "__keyspace@" + strconv.Itoa(db) + "__:" + key
}

// keyWatch is one watcher's subscription to a key's channel: Kicks gets a
// token (coalesced) whenever an event it wants arrives on it, when the
// subscription becomes active after the watcher's start (events may have
// come before), and when it is made again after the subscriber connection
// was lost (events may have been missed meanwhile). The watcher then looks
// at the key.
type keyWatch struct {
	node    *subNode
	channel string
	// wants says which events kick (nil: all).
	wants  func(event string) bool
	kicks  chan struct{}
	closed bool
	// also: the watches of a hold's other keys (a multi-lock), whose kicks
	// come here; closed with this one.
	also     []*keyWatch
	stop     chan struct{}
	stopOnce sync.Once
}

// merge makes o's kicks kick w too, and closes o with w.
func (w *keyWatch) merge(o *keyWatch) {
	if w.stop == nil {
		w.stop = make(chan struct{})
	}
	w.also = append(w.also, o)
	stop := w.stop
	go func() {
		for {
			select {
			case <-o.Kicks():
				w.kick()
			case <-stop:
				return
			}
		}
	}()
}

func (w *keyWatch) Kicks() <-chan struct{} { return w.kicks }

// Done is closed when the Client is closed (no more kicks will come).
func (w *keyWatch) Done() <-chan struct{} { return w.node.done }

// Addr is the server the subscription is on.
func (w *keyWatch) Addr() string { return w.node.addr }

func (w *keyWatch) kick() {
	select {
	case w.kicks <- struct{}{}:
	default:
	}
}

// Close ends the watch (the channel is unsubscribed when no watcher has
// wanted it for a while).
func (w *keyWatch) Close() {
	if w != nil {
		w.node.remove(w)
		if w.stop != nil {
			w.stopOnce.Do(func() { close(w.stop) })
		}
		for _, o := range w.also {
			o.Close()
		}
	}
}

// hub holds the Client's subscriber connections, one per server.
type hub struct {
	mu     sync.Mutex
	nodes  map[string]*subNode
	closed bool
}

func newHub() *hub {
	return &hub{nodes: map[string]*subNode{}}
}

func (h *hub) close() {
	h.mu.Lock()
	nodes := h.nodes
	h.nodes = map[string]*subNode{}
	h.closed = true
	h.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
}

// watchKey subscribes a new watcher to key's channel on the server that
// serves key; wants filters the events that kick it (nil: all). since is
// when the watcher's interest began (for a hold: when its acquisition was
// sent): a subscription active since then has missed nothing, unless an
// event came between since and the watcher's start; one made later, or
// such an event, kicks the watcher once, as soon as it is active. It returns once
// the subscription is active, or with the server's refusal (an ACL without
// access to the channel, for one).
func (c *Client) watchKey(ctx context.Context, key string, since time.Time, wants func(string) bool) (*keyWatch, error) {
	p, err := c.poolForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.watchKeyOn(ctx, p, key, since, wants)
}

// watchKeyAt is watchKey on the server at addr (the one that answered for
// key last: the client's slot map may be stale).
func (c *Client) watchKeyAt(ctx context.Context, addr, key string, since time.Time, wants func(string) bool) (*keyWatch, error) {
	p, err := c.poolForAddr(ctx, key, addr)
	if err != nil {
		return nil, err
	}
	return c.watchKeyOn(ctx, p, key, since, wants)
}

func (c *Client) watchKeyOn(ctx context.Context, p *wire.Pool, key string, since time.Time, wants func(string) bool) (*keyWatch, error) {
	s := p.Settings()
	db := s.DB
	if c.cluster != nil {
		db = 0
	}
	c.hub.mu.Lock()
	if c.hub.closed {
		c.hub.mu.Unlock()
		return nil, ErrClosed
	}
	n := c.hub.nodes[s.Addr]
	if n == nil {
		n = &subNode{settings: s, addr: s.Addr, callTimeout: c.cfg.callTimeout,
			chans: map[string]*channelState{}, done: make(chan struct{})}
		c.hub.nodes[s.Addr] = n
	}
	c.hub.mu.Unlock()
	w := &keyWatch{node: n, channel: channelOf(db, key), wants: wants, kicks: make(chan struct{}, 1)}
	if err := n.add(ctx, w, since); err != nil {
		return nil, err
	}
	return w, nil
}

// channelState: a channel's watchers, and since when it is subscribed on
// the live connection (zero: not now).
type channelState struct {
	watchers  map[*keyWatch]struct{}
	active    time.Time
	idleSince time.Time // when the last watcher left
	// lastEvent: when each event last arrived (by name).
	lastEvent map[string]time.Time
}

// subNode is the subscriber connection to one server and its channels.
type subNode struct {
	settings    wire.Settings
	addr        string
	callTimeout time.Duration

	// op serialises subscription changes and (re)connecting.
	op sync.Mutex

	// mu guards what the connection's reader reads (held briefly).
	mu     sync.Mutex
	conn   *wire.Conn
	chans  map[string]*channelState
	closed bool
	// reconnecting: a goroutine is making the connection again.
	reconnecting bool
	done         chan struct{} // closed by close
}

// watched reports whether some channel has a watcher. Called with mu held.
func (n *subNode) watched() bool {
	for _, st := range n.chans {
		if len(st.watchers) > 0 {
			return true
		}
	}
	return false
}

// connect dials the subscriber connection and subscribes every channel
// watched now (lingering ones are dropped), then kicks their watchers.
// Called with op held.
func (n *subNode) connect(ctx context.Context) error {
	conn, err := wire.Dial(ctx, n.settings)
	if err != nil {
		return err
	}
	conn.OnPush(n.deliver)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		conn.Close()
		return ErrClosed
	}
	chans := make([]string, 0, len(n.chans))
	for ch, st := range n.chans {
		if len(st.watchers) == 0 {
			delete(n.chans, ch)
			continue
		}
		st.active = time.Time{}
		chans = append(chans, ch)
	}
	n.mu.Unlock()
	if err := subscribeAll(ctx, conn, n.callTimeout, "SUBSCRIBE", chans); err != nil {
		conn.Close()
		return err
	}
	now := time.Now()
	n.mu.Lock()
	n.conn = conn
	var all []*keyWatch
	for _, st := range n.chans {
		st.active = now
		for w := range st.watchers {
			all = append(all, w)
		}
	}
	n.mu.Unlock()
	for _, w := range all {
		w.kick()
	}
	go n.supervise(conn)
	return nil
}

// subscribeAll sends cmd (SUBSCRIBE or UNSUBSCRIBE) for every channel,
// a few per round trip, and waits for the confirmations.
func subscribeAll(ctx context.Context, conn *wire.Conn, timeout time.Duration, cmd string, chans []string) error {
	for len(chans) > 0 {
		batch := chans
		if len(batch) > 8 {
			batch = batch[:8]
		}
		chans = chans[len(batch):]
		cmds := make([][]interface{}, len(batch))
		for i, ch := range batch {
			cmds[i] = []interface{}{cmd, ch}
		}
		if _, err := conn.Do(ctx, timeout, cmds...); err != nil {
			return err
		}
	}
	return nil
}

// supervise pings the connection while it lives, sweeps the lingering
// channels, and makes the connection again when it dies.
func (n *subNode) supervise(conn *wire.Conn) {
	ticker := time.NewTicker(subscriberPing)
	defer ticker.Stop()
	for {
		select {
		case <-conn.Done():
			n.lost(conn)
			return
		case <-ticker.C:
			ctx, cancel := context.WithTimeout(context.Background(), n.callTimeout)
			_, _ = conn.Do(ctx, n.callTimeout, []interface{}{"PING"}) // a failure closes it
			cancel()
			n.sweep()
		}
	}
}

// lost: the subscriber connection died; make it again in the background
// while channels are watched (their watchers are kicked once it is back).
func (n *subNode) lost(conn *wire.Conn) {
	n.mu.Lock()
	if n.conn == conn {
		n.conn = nil
	}
	for _, st := range n.chans {
		st.active = time.Time{}
	}
	if n.closed || n.reconnecting || !n.watched() {
		n.mu.Unlock()
		return
	}
	n.reconnecting = true
	n.mu.Unlock()
	go func() {
		delay := 10 * time.Millisecond
		for {
			n.op.Lock()
			n.mu.Lock()
			done := n.closed || n.conn != nil || !n.watched()
			n.mu.Unlock()
			var err error
			if !done {
				ctx, cancel := context.WithTimeout(context.Background(), n.settings.Handshake+n.callTimeout)
				err = n.connect(ctx)
				cancel()
			}
			if done || err == nil {
				n.mu.Lock()
				n.reconnecting = false
				n.mu.Unlock()
				n.op.Unlock()
				return
			}
			n.op.Unlock()
			time.Sleep(delay)
			if delay < time.Second {
				delay *= 2
			}
		}
	}()
}

// deliver is the connection's push handler: an event on a channel.
func (n *subNode) deliver(channel, event string) {
	n.mu.Lock()
	if st := n.chans[channel]; st != nil {
		if st.lastEvent == nil {
			st.lastEvent = map[string]time.Time{}
		}
		st.lastEvent[event] = time.Now()
		for w := range st.watchers {
			if w.wants == nil || w.wants(event) {
				w.kick()
			}
		}
	}
	n.mu.Unlock()
}

func (n *subNode) add(ctx context.Context, w *keyWatch, since time.Time) error {
	n.op.Lock()
	defer n.op.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	st := n.chans[w.channel]
	if st == nil {
		st = &channelState{watchers: map[*keyWatch]struct{}{}}
		n.chans[w.channel] = st
	}
	st.watchers[w] = struct{}{}
	active := st.active
	missed := false // an event w wants came since its start
	for ev, at := range st.lastEvent {
		if at.After(since) && (w.wants == nil || w.wants(ev)) {
			missed = true
		}
	}
	conn := n.conn
	n.mu.Unlock()
	if conn == nil {
		// Not connected: connect (which subscribes every watched channel
		// and kicks the watchers).
		if err := n.connect(ctx); err != nil {
			n.drop(w)
			return err
		}
		return nil
	}
	if !active.IsZero() {
		if active.After(since) || missed {
			// Subscribed after the watcher's start, or an event came
			// between its start and now (delivered to no one): look once.
			w.kick()
		}
		return nil
	}
	replies, err := conn.Do(ctx, n.callTimeout, []interface{}{"SUBSCRIBE", w.channel})
	if err != nil {
		// The connection died: lost() makes it again, subscribes this
		// channel too and kicks w.
		return nil
	}
	if se, ok := replies[0].(wire.ServerError); ok {
		n.drop(w)
		return serverError(n.addr, se)
	}
	n.mu.Lock()
	if n.conn == conn {
		st.active = time.Now()
	}
	n.mu.Unlock()
	w.kick()
	return nil
}

// drop forgets w and, if it was the channel's only watcher and the channel
// is not subscribed, the channel (a failed add). Called with op held.
func (n *subNode) drop(w *keyWatch) {
	n.mu.Lock()
	if st := n.chans[w.channel]; st != nil {
		delete(st.watchers, w)
		if len(st.watchers) == 0 && st.active.IsZero() {
			delete(n.chans, w.channel)
		}
	}
	n.mu.Unlock()
}

// remove: w stops watching; its channel lingers (see sweep).
func (n *subNode) remove(w *keyWatch) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if st := n.chans[w.channel]; st != nil {
		delete(st.watchers, w)
		if len(st.watchers) == 0 {
			st.idleSince = time.Now()
		}
	}
}

// sweep unsubscribes the channels nobody has watched for linger.
func (n *subNode) sweep() {
	n.op.Lock()
	defer n.op.Unlock()
	n.mu.Lock()
	var stale []string
	for ch, st := range n.chans {
		if len(st.watchers) == 0 && time.Since(st.idleSince) >= linger {
			stale = append(stale, ch)
			delete(n.chans, ch)
		}
	}
	conn := n.conn
	n.mu.Unlock()
	if conn != nil {
		_ = subscribeAll(context.Background(), conn, n.callTimeout, "UNSUBSCRIBE", stale)
	}
}

func (n *subNode) close() {
	n.mu.Lock()
	if !n.closed {
		close(n.done)
	}
	n.closed = true
	conn := n.conn
	n.conn = nil
	n.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}
