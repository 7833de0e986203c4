package hashlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"hashlock"
	"hashlock/internal/testserver"
)

// The library's connections use the go-redis client's credentials and
// database.
func TestPasswordAndDatabase(t *testing.T) {
	s, err := testserver.Start("redis", testserver.Options{Config: []string{"--requirepass", "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "s3cret", DB: 2, Protocol: 2})
	defer rdb.Close()
	hl := hashlock.New(rdb)
	defer hl.Close()
	key := newKey()
	lock := hl.NewLock(key)
	h, err := lock.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 1 {
		t.Fatalf("the lock is not in database 2")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}

	wrong := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "wrong"})
	defer wrong.Close()
	hw := hashlock.New(wrong)
	defer hw.Close()
	if _, err := hw.NewLock(key).Acquire(ctx); err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("wrong password: %v", err)
	}
}

// A user without the CLIENT command (ACL): the library's connections get no
// CLIENT ID, and the give-back of a grant that reached a cancelled wait
// falls back to sending LOCK.RELEASE a few times.
func TestUserWithoutTheClientCommand(t *testing.T) {
	each(t, func(t *testing.T, s *testserver.Server) {
		admin := s.Client()
		defer admin.Close()
		ctx := context.Background()
		if err := admin.Do(ctx, "ACL", "SETUSER", "locker", "reset", "on", ">pw", "~*", "+@all", "-client").Err(); err != nil {
			t.Fatal(err)
		}
		defer admin.Do(ctx, "ACL", "DELUSER", "locker")
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "locker", Password: "pw"})
		hl := hashlock.New(rdb)
		t.Cleanup(func() { hl.Close(); rdb.Close() })
		e := &env{t: t, s: s, rdb: rdb, hl: hl, ctx: ctx}
		if err := rdb.Do(ctx, "CLIENT", "ID").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("CLIENT ID as locker: %v, want NOPERM", err)
		}
		for _, mode := range [][]hashlock.LockOption{nil, {hashlock.WithoutKeepalive()}} {
			h, err := hl.NewLock(newKey(), mode...).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cancelRace(t, e, 12, []hashlock.LockOption{hashlock.WithoutKeepalive()})
	})
}
