package hashlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"hashlock/internal/wire"
)

// ErrNoLeader: nobody leads the election now (Election.Leader).
var ErrNoLeader = errors.New("hashlock: the election has no leader")

// ErrDuplicateCandidate: Campaign found its candidate id leading already
// through another Election (another process given the same id). Ids must
// be unique among the candidates of one election.
var ErrDuplicateCandidate = errors.New("hashlock: another candidate with the same id leads")

// Election is leader election on one key (etcd's concurrency.Election,
// Curator's LeaderLatch): candidates Campaign, the server queues them
// FIFO, the first leads until it resigns, its process dies or its
// connection closes, and the next in line takes over at once. Each term
// has a number that grows with every term (the fencing token of the grant),
// for the resources the leader writes to.
//
// Underneath it is the key's lock: Campaign is LOCK.ACQUIRE key id BLOCK 0
// KEEPALIVE TOKEN, Resign is LOCK.RELEASE, Leader is LOCK.INFO, and Observe
// follows the module's lifecycle keyspace events (lock.acquired, ...), so
// the server must send them: notify-keyspace-events with K (or E) and d
// (or A); Campaign and Observe fail with an *EventsOffError otherwise. An
// Election is one candidate; its methods are safe for concurrent use.
type Election struct {
	c    *Client
	name string
	id   string
	lock *Lock

	// campaign serialises Campaign calls (a second one waits for the
	// first, then returns the same leadership).
	campaign sync.Mutex
	mu       sync.Mutex
	cur      *Leadership
}

type electionConfig struct {
	id    string
	lease time.Duration
	check time.Duration
}

// ElectionOption configures NewElection.
type ElectionOption func(*electionConfig)

// WithCandidateID sets the candidate's id: what Leader and Observe report
// while it leads (default: a fresh UUID per Election). It must be unique
// among the election's candidates.
func WithCandidateID(id string) ElectionOption {
	return func(c *electionConfig) { c.id = id }
}

// WithTermLease sets the lease of a term (default DefaultLease). The
// server renews it while the leader's connection is open; it is the safety
// net where the connection's tie cannot follow (a failover, a restart).
func WithTermLease(d time.Duration) ElectionOption {
	return func(c *electionConfig) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithTermCheckInterval sets how often a leader's term is looked at besides
// the events (default: a third of the lease); see WithCheckInterval.
func WithTermCheckInterval(d time.Duration) ElectionOption {
	return func(c *electionConfig) {
		if d > 0 {
			c.check = d
		}
	}
}

// NewElection returns the election on key name, with this Client's
// connections, as one candidate.
func (c *Client) NewElection(name string, opts ...ElectionOption) *Election {
	cfg := electionConfig{lease: DefaultLease}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.id == "" {
		cfg.id = newOwner()
	}
	lockOpts := []LockOption{WithOwner(cfg.id), WithToken(), WithLease(cfg.lease)}
	if cfg.check > 0 {
		lockOpts = append(lockOpts, WithCheckInterval(cfg.check))
	}
	return &Election{c: c, name: name, id: cfg.id, lock: c.NewLock(name, lockOpts...)}
}

// Name is the election's key.
func (e *Election) Name() string { return e.name }

// ID is this candidate's id.
func (e *Election) ID() string { return e.id }

// Leader is who leads, and the number of the term.
type Leader struct {
	ID   string
	Term uint64
}

// Leadership is one term of this candidate, from the Campaign that won it
// to its end: Resign, or a loss (the leader's connection closed, the key
// was force-released or lapsed). Done closes when it ends, like a
// context's; the server has handed the election on by then.
type Leadership struct {
	e *Election
	h *Hold
}

// Term is the term's number: greater than every earlier term's, so a
// resource written by leaders can refuse a write of an older term (a
// leader that was paused past its end).
func (l *Leadership) Term() uint64 { return l.h.Token() }

// Done is closed when the term ends.
func (l *Leadership) Done() <-chan struct{} { return l.h.Done() }

// Err is nil while the term lasts, ErrReleased after Resign, else a
// *LostError (errors.Is(err, ErrLockLost)) saying how it was revoked.
func (l *Leadership) Err() error { return l.h.Err() }

// Context returns a context cancelled when the term ends; context.Cause
// is Err.
func (l *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.h.Context(parent)
}

// Resign ends the term: the next candidate in line leads at once. Like
// Hold.Release, it finishes in the background if ctx ends first.
func (l *Leadership) Resign(ctx context.Context) error {
	err := l.h.Release(ctx)
	if errors.Is(err, ErrReleased) {
		return nil // resigned already
	}
	return err
}

// Campaign waits in the server's queue until this candidate leads, or ctx
// ends (cancelled: the wait's connection is closed and a grant on its way
// is given back; a deadline: ErrNotAcquired). It returns the term. If the
// candidate leads already, it returns the term in force.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	if err := e.c.requireEvents(ctx, e.name); err != nil {
		return nil, fmt.Errorf("hashlock: election %q: %w", e.name, err)
	}
	e.campaign.Lock()
	defer e.campaign.Unlock()
	if ld := e.Leadership(); ld != nil {
		return ld, nil
	}
	// Subscribe before the wait, so the term's own watch finds the
	// subscription active from the grant on (the channel lingers after).
	if ready, err := e.c.watchKey(ctx, e.name, time.Now(), func(string) bool { return false }); err == nil {
		defer ready.Close()
	}
	h, err := e.lock.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("hashlock: election %q: %w", e.name, err)
	}
	if e.lock.Holds() > 1 {
		e.lock.dropDuplicate(h)
		return nil, fmt.Errorf("hashlock: election %q: candidate %q: %w", e.name, e.id, ErrDuplicateCandidate)
	}
	ld := &Leadership{e: e, h: h}
	e.mu.Lock()
	e.cur = ld
	e.mu.Unlock()
	return ld, nil
}

// Leadership is this candidate's term in force, nil when it does not lead
// (as this Election last learned it).
func (e *Election) Leadership() *Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != nil && e.cur.h.Err() != nil {
		e.cur = nil
	}
	return e.cur
}

// Resign ends this candidate's term if it leads (nothing otherwise).
func (e *Election) Resign(ctx context.Context) error {
	if ld := e.Leadership(); ld != nil {
		return ld.Resign(ctx)
	}
	return nil
}

// Leader asks the server who leads now (LOCK.INFO): ErrNoLeader when
// nobody does.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	info, _, err := e.info(ctx)
	if err != nil {
		return Leader{}, err
	}
	if info == nil {
		return Leader{}, ErrNoLeader
	}
	return Leader{ID: info.Owner, Term: info.Token}, nil
}

// info is LOCK.INFO and the server that answered.
func (e *Election) info(ctx context.Context) (*LockInfo, string, error) {
	reply, ln, err := e.c.call(ctx, e.name, nil, e.c.cfg.callTimeout, []interface{}{"LOCK.INFO", e.name})
	if err != nil {
		return nil, "", fmt.Errorf("hashlock: election %q: %w", e.name, err)
	}
	addr := ln.conn.Addr()
	ln.put()
	if se, ok := reply.(wire.ServerError); ok {
		return nil, addr, serverError(addr, se)
	}
	info, err := parseInfo(reply)
	return info, addr, err
}

// EventKind says what an Observe event reports.
type EventKind int

const (
	// NewLeader: Leader leads now (another candidate than this one).
	NewLeader EventKind = iota + 1
	// NoLeader: nobody leads now.
	NoLeader
	// Elected: this candidate leads now (Leader is its term).
	Elected
	// Revoked: this candidate's term Leader ended (the event after it
	// says who leads now).
	Revoked
)

func (k EventKind) String() string {
	switch k {
	case NewLeader:
		return "new-leader"
	case NoLeader:
		return "no-leader"
	case Elected:
		return "elected"
	case Revoked:
		return "revoked"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change of leader as an observer sees it.
type Event struct {
	Kind EventKind
	// Leader: the leader now (NewLeader, Elected), or the term that ended
	// (Revoked); zero for NoLeader.
	Leader Leader
}

func (ev Event) String() string {
	if ev.Kind == NoLeader {
		return "no-leader"
	}
	return fmt.Sprintf("%s %s term %d", ev.Kind, ev.Leader.ID, ev.Leader.Term)
}

// Observe follows the election until ctx ends (the channel is then
// closed; also when the Client is closed). The first event is the state
// now (NewLeader, Elected or NoLeader); then one event per change, in the
// order the server made them: NewLeader when another candidate takes
// over, Elected and Revoked for this candidate's own terms, NoLeader when
// the key is free. Terms only grow along the stream.
//
// It is driven by the key's lifecycle keyspace events, never by polling:
// at each event it reads LOCK.INFO, which already shows the new holder. A
// change that is superseded before that read (two hand-offs within one
// round trip) shows as the later one only, as etcd's Observe does; so does
// a change while the subscriber connection was being made again. Observe
// fails at once with an *EventsOffError when the server does not send the
// events. The consumer sets the pace: while it does not read, changes
// collapse into the latest.
func (e *Election) Observe(ctx context.Context) (<-chan Event, error) {
	if err := e.c.requireEvents(ctx, e.name); err != nil {
		return nil, fmt.Errorf("hashlock: election %q: %w", e.name, err)
	}
	// Events are published on the node that serves the key: ask it first
	// (a cluster client's slot map may be stale; LOCK.INFO follows MOVED).
	_, addr, err := e.info(ctx)
	if err != nil {
		return nil, err
	}
	w, err := e.c.watchKeyAt(ctx, addr, e.name, time.Time{}, nil)
	if err != nil {
		return nil, fmt.Errorf("hashlock: election %q: subscribing to its keyspace events: %w", e.name, err)
	}
	out := make(chan Event, 16)
	go e.observe(ctx, w, out)
	return out, nil
}

func (e *Election) observe(ctx context.Context, w *keyWatch, out chan<- Event) {
	defer close(out)
	defer func() { w.Close() }()
	var last *Leader
	started := false
	var retry <-chan time.Time
	delay := 10 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Done():
			return
		case <-w.Kicks():
		case <-retry:
		}
		retry = nil
		info, addr, err := e.info(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			retry = time.After(delay) // the server is away: look again soon
			if delay < time.Second {
				delay *= 2
			}
			continue
		}
		delay = 10 * time.Millisecond
		if addr != "" && addr != w.Addr() {
			// The key moved to another node (cluster): follow it there.
			if nw, err := e.c.watchKeyAt(ctx, addr, e.name, time.Time{}, nil); err == nil {
				w.Close()
				w = nw
			}
		}
		var now *Leader
		if info != nil {
			now = &Leader{ID: info.Owner, Term: info.Token}
		}
		for _, ev := range e.changes(last, now, started) {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
		last, started = now, true
	}
}

// changes: the events from the leader last seen to the one now.
func (e *Election) changes(last, now *Leader, started bool) []Event {
	if started && (last == nil) == (now == nil) && (last == nil || *last == *now) {
		return nil
	}
	var evs []Event
	if last != nil && last.ID == e.id {
		evs = append(evs, Event{Kind: Revoked, Leader: *last})
	}
	switch {
	case now == nil:
		evs = append(evs, Event{Kind: NoLeader})
	case now.ID == e.id:
		evs = append(evs, Event{Kind: Elected, Leader: *now})
	default:
		evs = append(evs, Event{Kind: NewLeader, Leader: *now})
	}
	return evs
}

// dropDuplicate gives back a grant that turned out to be a re-entry of a
// lock its owner id holds elsewhere (another process with the same
// candidate id): the hold is released and the lock untied from this
// connection (its holder's own check ties it to its connection again),
// and the tenure ends without touching it further.
func (l *Lock) dropDuplicate(h *Hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := h.t
	t.op.Lock()
	ln := t.tied()
	if ln != nil {
		ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.callTimeout)
		_, err := ln.conn.Do(ctx, l.c.cfg.callTimeout, l.releaseArgs(),
			l.withReplicas([]interface{}{"LOCK.RENEW", l.name, l.owner, "PX", ms(l.cfg.lease)}))
		cancel()
		if err != nil {
			ln.close()
		}
	}
	t.op.Unlock()
	t.release()
	l.current()
}
