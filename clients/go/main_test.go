package hashlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

// waitFor is generous: the machine is shared and loaded; what matters is
// the order of magnitude, which the tests check separately where it counts.
const waitFor = 10 * time.Second

// eventsOn: the server options that enable the lifecycle events.
var eventsOn = []string{"--notify-keyspace-events", "Kd"}

// servers: one Redis 7.0 and one Valkey 9.1 with the module, shared by the
// tests (each test uses keys of its own).
var servers []*testserver.Server

// exampleAddr is the server ExampleLock runs against.
var exampleAddr string

func TestMain(m *testing.M) {
	if spec := os.Getenv("HASHLOCK_TEST_HOLDER"); spec != "" {
		runHolder(spec) // a child process of TestKeepaliveKilledHolder
		return
	}
	if spec := os.Getenv("HASHLOCK_TEST_CANDIDATE"); spec != "" {
		runCandidate(spec) // a child process of TestElectionTakeovers
		return
	}
	for _, kind := range testserver.Kinds {
		// The servers send the module's lifecycle events, as the shipped
		// redis.conf has them (elections need them; locks use them).
		s, err := testserver.Start(kind, testserver.Options{Config: eventsOn})
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting servers:", err)
			stopAll()
			os.Exit(1)
		}
		servers = append(servers, s)
	}
	exampleAddr = servers[0].Addr
	code := m.Run()
	stopAll()
	os.Exit(code)
}

func stopAll() {
	for _, s := range servers {
		s.Stop()
	}
}

// each runs f as a subtest per server kind.
func each(t *testing.T, f func(t *testing.T, s *testserver.Server)) {
	t.Helper()
	for _, s := range servers {
		s := s
		t.Run(s.Kind, func(t *testing.T) { f(t, s) })
	}
}

// modes runs f with KEEPALIVE (the default) and with the watchdog.
func modes(t *testing.T, f func(t *testing.T, s *testserver.Server, mode []hashlock.LockOption)) {
	t.Helper()
	each(t, func(t *testing.T, s *testserver.Server) {
		t.Run("keepalive", func(t *testing.T) { f(t, s, nil) })
		t.Run("watchdog", func(t *testing.T) { f(t, s, []hashlock.LockOption{hashlock.WithoutKeepalive()}) })
	})
}

// env is what a test needs against one server: a go-redis client for
// assertions and a hashlock Client, both closed at the end.
type env struct {
	t   testing.TB
	s   *testserver.Server
	rdb *redis.Client
	hl  *hashlock.Client
	ctx context.Context
}

func newEnv(t *testing.T, s *testserver.Server, opts ...hashlock.ClientOption) *env {
	t.Helper()
	rdb := s.Client()
	hl := hashlock.New(rdb, opts...)
	t.Cleanup(func() {
		hl.Close()
		rdb.Close()
	})
	return &env{t: t, s: s, rdb: rdb, hl: hl, ctx: context.Background()}
}

func newKey() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lock:" + hex.EncodeToString(b[:])
}

// info is LOCK.INFO through go-redis (nil when free).
func (e *env) info(key string) map[string]interface{} {
	e.t.Helper()
	i, err := lockInfo(e.rdb, key)
	if err != nil {
		e.t.Fatalf("LOCK.INFO %s: %v", key, err)
	}
	return i
}

// lockInfo is LOCK.INFO as a map, in RESP2 or RESP3 (nil when free).
func lockInfo(c *redis.Client, key string) (map[string]interface{}, error) {
	v, err := c.Do(context.Background(), "LOCK.INFO", key).Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	switch x := v.(type) {
	case map[interface{}]interface{}:
		for k, val := range x {
			out[fmt.Sprint(k)] = val
		}
	case []interface{}:
		for i := 0; i+1 < len(x); i += 2 {
			out[fmt.Sprint(x[i])] = x[i+1]
		}
	}
	return out, nil
}

func (e *env) owner(key string) string {
	if i := e.info(key); i != nil {
		return fmt.Sprint(i["owner"])
	}
	return ""
}

func (e *env) waiters(key string) int64 {
	if i := e.info(key); i != nil {
		n, _ := i["waiters"].(int64)
		return n
	}
	return 0
}

// eventually polls cond every few ms until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// closedWithin reports whether ch closes within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// connectionsReceived is the server's total_connections_received.
func (e *env) connectionsReceived() int64 { return e.infoField("stats", "total_connections_received") }

// connectedClients is the server's connected_clients.
func (e *env) connectedClients() int64 { return e.infoField("clients", "connected_clients") }

func (e *env) infoField(section, field string) int64 {
	e.t.Helper()
	s, err := e.rdb.Info(e.ctx, section).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	e.t.Fatalf("no %s in INFO %s", field, section)
	return 0
}

// runHolder is the child process of TestKeepaliveKilledHolder: it takes
// the lock with KEEPALIVE, says "held" and sleeps until it is killed.
func runHolder(spec string) {
	addr, key, _ := strings.Cut(spec, " ")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	hl := hashlock.New(rdb)
	if _, err := hl.NewLock(key).TryAcquire(context.Background()); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("held")
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}
