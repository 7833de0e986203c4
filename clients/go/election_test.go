package hashlock_test

// Leader election: campaign, resign, leader, observe (driven by the
// module's lifecycle keyspace events), the error when the server does not
// send them, and the loss signal learning of losses from the events.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

// observer collects an Observe stream.
type observer struct {
	t      *testing.T
	events chan hashlock.Event
	cancel context.CancelFunc
}

func observe(t *testing.T, e *env, el *hashlock.Election) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	ch, err := el.Observe(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	o := &observer{t: t, events: make(chan hashlock.Event, 1024), cancel: cancel}
	go func() {
		for ev := range ch {
			o.events <- ev
		}
		close(o.events)
	}()
	t.Cleanup(cancel)
	return o
}

// next is the next event (fails after waitFor).
func (o *observer) next() hashlock.Event {
	o.t.Helper()
	select {
	case ev, ok := <-o.events:
		if !ok {
			o.t.Fatal("the observe channel closed")
		}
		return ev
	case <-time.After(waitFor):
		o.t.Fatal("no event")
	}
	return hashlock.Event{}
}

// expect checks the next event's kind and leader id.
func (o *observer) expect(kind hashlock.EventKind, id string) hashlock.Event {
	o.t.Helper()
	ev := o.next()
	if ev.Kind != kind || (id != "" && ev.Leader.ID != id) {
		o.t.Fatalf("event %v, want %v %s", ev, kind, id)
	}
	return ev
}

// quiet checks that no event comes within d.
func (o *observer) quiet(d time.Duration) {
	o.t.Helper()
	select {
	case ev := <-o.events:
		o.t.Fatalf("unexpected event %v", ev)
	case <-time.After(d):
	}
}

func TestElection(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		a := e.hl.NewElection(key, hashlock.WithCandidateID("node-a"))
		b := e.hl.NewElection(key, hashlock.WithCandidateID("node-b"))
		watcher := e.hl.NewElection(key) // observes only
		if _, err := a.Leader(e.ctx); !errors.Is(err, hashlock.ErrNoLeader) {
			t.Fatalf("Leader of a fresh election: %v", err)
		}
		o := observe(t, e, watcher)
		o.expect(hashlock.NoLeader, "")
		oa := observe(t, e, a)
		oa.expect(hashlock.NoLeader, "")

		la, err := a.Campaign(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if la.Err() != nil || a.Leadership() != la {
			t.Fatalf("leadership: %v", la.Err())
		}
		t1 := o.expect(hashlock.NewLeader, "node-a").Leader.Term
		if t1 != la.Term() || t1 == 0 {
			t.Fatalf("observed term %d, campaign's %d", t1, la.Term())
		}
		oa.expect(hashlock.Elected, "node-a")
		if l, err := b.Leader(e.ctx); err != nil || l != (hashlock.Leader{ID: "node-a", Term: t1}) {
			t.Fatalf("Leader: %v %v", l, err)
		}
		// Campaigning again while leading returns the same term.
		if again, err := a.Campaign(e.ctx); err != nil || again != la {
			t.Fatalf("second campaign: %v", err)
		}

		// b waits in the queue; a resigns; b leads at once.
		got := make(chan *hashlock.Leadership, 1)
		go func() {
			lb, err := b.Campaign(e.ctx)
			if err != nil {
				t.Error(err)
			}
			got <- lb
		}()
		eventually(t, "b to queue", func() bool { return e.waiters(key) == 1 })
		select {
		case <-got:
			t.Fatal("b elected while a leads")
		default:
		}
		if err := a.Resign(e.ctx); err != nil {
			t.Fatal(err)
		}
		lb := <-got
		if lb == nil {
			t.FailNow()
		}
		if lb.Term() <= t1 {
			t.Fatalf("term %d after %d", lb.Term(), t1)
		}
		if !errors.Is(la.Err(), hashlock.ErrReleased) || a.Leadership() != nil {
			t.Fatalf("a after resigning: %v", la.Err())
		}
		ev := o.expect(hashlock.NewLeader, "node-b")
		if ev.Leader.Term != lb.Term() {
			t.Fatalf("observed %v, b's term %d", ev, lb.Term())
		}
		oa.expect(hashlock.Revoked, "node-a")
		oa.expect(hashlock.NewLeader, "node-b")

		// Forced off: b's term is revoked, as it happens.
		started := time.Now()
		e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
		if !closedWithin(lb.Done(), 2*time.Second) {
			t.Fatal("b not told of its revocation")
		}
		t.Logf("revocation seen after %v: %v", time.Since(started), lb.Err())
		if !errors.Is(lb.Err(), hashlock.ErrLockLost) {
			t.Fatalf("b's Err: %v", lb.Err())
		}
		o.expect(hashlock.NoLeader, "")
		oa.expect(hashlock.NoLeader, "")
		o.quiet(100 * time.Millisecond)
		if err := b.Resign(e.ctx); err != nil { // not leading: nothing to do
			t.Fatal(err)
		}
	})
}

// The election's errors: no events, a duplicate candidate id, a cancelled
// campaign.
func TestElectionErrors(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		t.Run("events-off", func(t *testing.T) {
			off, err := testserver.Start(s.Kind, testserver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer off.Stop()
			e := newEnvAt(t, off.Addr)
			el := e.hl.NewElection(newKey())
			for name, call := range map[string]func(context.Context) error{
				"Campaign": func(ctx context.Context) error { _, err := el.Campaign(ctx); return err },
				"Observe":  func(ctx context.Context) error { _, err := el.Observe(ctx); return err },
			} {
				started := time.Now()
				err := call(e.ctx)
				var off *hashlock.EventsOffError
				if !errors.Is(err, hashlock.ErrEventsOff) || !errors.As(err, &off) {
					t.Fatalf("%s: %v, want ErrEventsOff", name, err)
				}
				if !strings.Contains(err.Error(), "CONFIG SET notify-keyspace-events Kd") || time.Since(started) > time.Second {
					t.Fatalf("%s: %v (after %v)", name, err, time.Since(started))
				}
				t.Logf("%s: %v", name, err)
			}
			// With some classes on, the advice keeps them.
			e.rdb.ConfigSet(e.ctx, "notify-keyspace-events", "Kx")
			_, err = el.Observe(e.ctx)
			if err == nil || !strings.Contains(err.Error(), "notify-keyspace-events xKd") {
				t.Fatalf("Observe with Kx: %v", err)
			}
			e.rdb.ConfigSet(e.ctx, "notify-keyspace-events", "Kxd")
			if _, err := el.Observe(e.ctx); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("duplicate-id", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			one := e.hl.NewElection(key, hashlock.WithCandidateID("twin"))
			other := newEnv(t, s).hl.NewElection(key, hashlock.WithCandidateID("twin"))
			l1, err := one.Campaign(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.Campaign(e.ctx); !errors.Is(err, hashlock.ErrDuplicateCandidate) {
				t.Fatalf("second twin: %v", err)
			}
			if i := e.info(key); i["holds"] != int64(1) || i["owner"] != "twin" {
				t.Fatalf("after the duplicate: %v", i)
			}
			// The twin that leads is tied again by its check: killing its
			// connection still hands the election on.
			if l1.Err() != nil {
				t.Fatal(l1.Err())
			}
			if err := l1.Resign(e.ctx); err != nil {
				t.Fatal(err)
			}
			if e.info(key) != nil {
				t.Fatal("still held after the resignation")
			}
		})
		t.Run("cancelled-campaign", func(t *testing.T) {
			e := newEnv(t, s)
			key := newKey()
			leader, err := e.hl.NewElection(key).Campaign(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
			defer cancel()
			if _, err := e.hl.NewElection(key).Campaign(ctx); !errors.Is(err, hashlock.ErrNotAcquired) {
				t.Fatalf("campaign past its deadline: %v", err)
			}
			if err := leader.Resign(e.ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// With events, a held lock learns of a loss its connection does not show
// as it happens, not at its next check (an hour away here).
func TestLossSignalEvents(t *testing.T) {
	slow := hashlock.WithCheckInterval(time.Hour)
	modes(t, func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption) {
		for _, how := range []string{"force-release", "expiry", "taken-over"} {
			t.Run(how, func(t *testing.T) {
				e := newEnv(t, s)
				key := newKey()
				lock := e.hl.NewLock(key, append(mode, slow)...)
				h := mustAcquire(t, e, lock)
				time.Sleep(50 * time.Millisecond) // the subscription is made beside the acquisition
				started := time.Now()
				switch how {
				case "force-release":
					e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
				case "expiry":
					e.rdb.Do(e.ctx, "LOCK.RENEW", key, lock.Owner(), "PX", 1) // untied, 1 ms left
				case "taken-over":
					e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
					e.rdb.Do(e.ctx, "LOCK.ACQUIRE", key, "someone-else", "PX", 30000)
				}
				if !closedWithin(h.Done(), time.Second) {
					t.Fatalf("not told within 1 s (check interval 1 h): %v", h.Err())
				}
				t.Logf("told after %v: %v", time.Since(started).Round(time.Microsecond), h.Err())
				if !errors.Is(h.Err(), hashlock.ErrLockLost) {
					t.Fatal(h.Err())
				}
			})
		}
	})
}

// fenced is the resource the leaders write to: it keeps the highest term
// it was written with and refuses older ones.
const fenced = `local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0`

// runCandidate is a child process of TestElectionTakeovers: one candidate
// that campaigns, reports each term on stdout (one line per write), writes
// the term to the fenced resource, and campaigns again when revoked.
func runCandidate(spec string) {
	f := strings.Fields(spec)
	addr, key, id, resource := f[0], f[1], f[2], f[3]
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	hl := hashlock.New(rdb)
	el := hl.NewElection(key, hashlock.WithCandidateID(id))
	ctx := context.Background()
	say := func(format string, args ...interface{}) {
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	for {
		ld, err := el.Campaign(ctx)
		if err != nil {
			say("error %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		say("elected %d %d %d", ld.Term(), time.Now().UnixNano(), hashlock.LeadershipConnID(ld))
		ok, err := rdb.Eval(ctx, fenced, []string{resource}, ld.Term()).Int()
		say("wrote %d %d %v", ld.Term(), ok, err)
		<-ld.Done()
		say("revoked %d %d %v", ld.Term(), time.Now().UnixNano(), ld.Err())
	}
}

// report is a line of a candidate process.
type report struct {
	c     *candidate
	kind  string
	term  uint64
	at    time.Time
	extra string
}

type candidate struct {
	id  string
	cmd *exec.Cmd
}

func startCandidate(t *testing.T, s *testserver.Server, key, id, resource string, reports chan<- report) *candidate {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HASHLOCK_TEST_CANDIDATE="+strings.Join([]string{s.Addr, key, id, resource}, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &candidate{id: id, cmd: cmd}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 4)
			r := report{c: c, kind: f[0]}
			if len(f) > 1 {
				r.term, _ = strconv.ParseUint(f[1], 10, 64)
			}
			if len(f) > 2 && (r.kind == "elected" || r.kind == "revoked") {
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				r.at = time.Unix(0, ns)
			}
			r.extra = strings.Join(f[2:], " ")
			reports <- r
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// TestElectionTakeovers: three candidate processes and two observers; the
// leader is forced out 200 times per server (SIGKILL of its process,
// CLIENT KILL of its connection, LOCK.FORCERELEASE, in turn). Every
// takeover elects another candidate with a greater term, which the fenced
// resource accepts; the ex-leader (when alive) is told it was revoked;
// both observers see every change, in order; at every quiet point exactly
// one candidate believes it leads, the one LOCK.INFO names. Prints the
// takeover times (the new leader's campaign returning, measured from the
// kill) per way.
func TestElectionTakeovers(t *testing.T) {
	rounds := 200
	if v, err := strconv.Atoi(os.Getenv("HASHLOCK_ELECTION_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	each(t, func(t *testing.T, s *testserver.Server) {
		e := newEnv(t, s)
		key := newKey()
		resource := key + ":resource"
		obs := []*observer{
			observe(t, e, e.hl.NewElection(key)),
			observe(t, e, newEnv(t, s).hl.NewElection(key)),
		}
		for _, o := range obs {
			o.expect(hashlock.NoLeader, "")
		}
		reports := make(chan report, 64)
		next := 0
		spawn := func() *candidate {
			next++
			return startCandidate(t, s, key, fmt.Sprintf("candidate-%d", next), resource, reports)
		}
		receive := func(what string) report {
			t.Helper()
			select {
			case r := <-reports:
				if r.kind == "error" {
					t.Fatalf("%s: %s", r.c.id, r.extra)
				}
				return r
			case <-time.After(waitFor):
				t.Fatalf("no report while waiting for %s", what)
			}
			return report{}
		}
		// leading: the candidates that believe they lead.
		leading := map[*candidate]uint64{}
		var leader *candidate
		var term uint64
		var conn int64
		takeElection := func(r report) {
			t.Helper()
			if len(leading) != 0 {
				t.Fatalf("%s elected (term %d) while %v believe they lead", r.c.id, r.term, leading)
			}
			if r.term <= term {
				t.Fatalf("%s elected with term %d after term %d", r.c.id, r.term, term)
			}
			leading[r.c] = r.term
			leader, term = r.c, r.term
			conn, _ = strconv.ParseInt(strings.Fields(r.extra)[1], 10, 64)
		}
		wrote := false
		checkWrote := func(r report) {
			t.Helper()
			if r.kind != "wrote" || r.c != leader || r.term != term || !strings.HasPrefix(r.extra, "1 ") {
				t.Fatalf("%s: %s %d %s (the leader is %s, term %d)", r.c.id, r.kind, r.term, r.extra, leader.id, term)
			}
			wrote = true
		}
		spawn()
		takeElection(receive("the first election"))
		for _, o := range obs {
			o.expect(hashlock.NewLeader, leader.id)
		}
		spawn()
		spawn()
		ways := []string{"sigkill", "client-kill", "forcerelease"}
		elapsed := map[string][]time.Duration{}
		revokedAfter := map[string][]time.Duration{}
		var worstBelief time.Duration
		for round := 0; round < rounds; round++ {
			eventually(t, "all three candidates to queue", func() bool { return e.waiters(key) == 2 })
			for !wrote { // the term in force wrote to the fenced resource
				checkWrote(receive("the leader's write"))
			}
			wrote = false
			way := ways[round%len(ways)]
			old, oldTerm := leader, term
			started := time.Now()
			switch way {
			case "sigkill":
				_ = old.cmd.Process.Kill()
				delete(leading, old) // it is dead: it believes nothing
			case "client-kill":
				if err := e.rdb.ClientKillByFilter(e.ctx, "ID", itoa(conn)).Err(); err != nil {
					t.Fatal(err)
				}
			case "forcerelease":
				e.rdb.Do(e.ctx, "LOCK.FORCERELEASE", key)
			}
			var revokedAt, electedAt time.Time
			elected := false
			for !elected || (way != "sigkill" && revokedAt.IsZero()) {
				r := receive(way + " takeover")
				switch {
				case r.kind == "revoked" && r.c == old && r.term == oldTerm:
					revokedAt = r.at
					delete(leading, old)
					revokedAfter[way] = append(revokedAfter[way], r.at.Sub(started))
				case r.kind == "elected":
					if r.c == old {
						t.Fatalf("%s re-elected ahead of the queue", old.id)
					}
					delete(leading, old) // the ex-leader may learn it a moment later
					takeElection(r)
					elapsed[way] = append(elapsed[way], r.at.Sub(started))
					electedAt = r.at
					elected = true
				case r.kind == "wrote" && elected:
					checkWrote(r)
				default:
					t.Fatalf("%s: unexpected %s %d %s", r.c.id, r.kind, r.term, r.extra)
				}
			}
			if !revokedAt.IsZero() {
				// The ex-leader still believed it led this long after its
				// successor was elected (the server had ended its term):
				// told by the events, not by the periodic check (10 s).
				lag := revokedAt.Sub(electedAt)
				if lag > 750*time.Millisecond {
					t.Fatalf("round %d (%s): the ex-leader was told %v after its successor was elected", round, way, lag)
				}
				if lag > worstBelief {
					worstBelief = lag
				}
			}
			for i, o := range obs {
				ev := o.expect(hashlock.NewLeader, leader.id)
				if ev.Leader.Term != term {
					t.Fatalf("observer %d saw %v, the new term is %d", i, ev, term)
				}
			}
			if i := e.info(key); i["owner"] != leader.id || uint64(i["token"].(int64)) != term {
				t.Fatalf("LOCK.INFO %v, leader %s term %d", i, leader.id, term)
			}
			if len(leading) != 1 {
				t.Fatalf("after round %d, %d candidates believe they lead", round, len(leading))
			}
			if way == "sigkill" {
				_ = old.cmd.Wait()
				spawn()
			}
		}
		for _, way := range ways {
			t.Logf("%s: %d takeovers, new leader elected after p50 %v p99 %v max %v; the ex-leader (if alive) told after p50 %v",
				way, len(elapsed[way]), pct(elapsed[way], 50), pct(elapsed[way], 99), pct(elapsed[way], 100), pct(revokedAfter[way], 50))
		}
		t.Logf("an ex-leader believed it led at most %v after its successor was elected (its writes are fenced by term)", worstBelief)
		for _, o := range obs {
			o.quiet(50 * time.Millisecond)
		}
	})
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s)+99)/100 - 1
	if i < 0 {
		i = 0
	}
	return s[i].Round(10 * time.Microsecond)
}
