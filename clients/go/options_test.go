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
