package hashlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"hashlock"
)

func ExampleLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr}) // e.g. "localhost:6380"
	defer rdb.Close()
	locks := hashlock.New(rdb)
	defer locks.Close()

	a := locks.NewLock("example:orders:42", hashlock.WithCheckInterval(50*time.Millisecond))
	b := locks.NewLock("example:orders:42")
	held, err := a.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// b waits in the server's queue until its context ends; then it has
	// left the queue, and a's release will not hand it the lock.
	wait, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = b.Acquire(wait)
	cancel()
	fmt.Println("b gave up:", errors.Is(err, hashlock.ErrNotAcquired))

	// The loss signal: an operator force-releases a's lock.
	rdb.Do(ctx, "LOCK.FORCERELEASE", "example:orders:42")
	<-held.Done()
	fmt.Println("a lost it:", errors.Is(held.Err(), hashlock.ErrLockLost))

	// b takes it now, and gives it back.
	held, err = b.TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b holds it:", b.Holds())
	if err := held.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", errors.Is(held.Err(), hashlock.ErrReleased))
	// Output:
	// b gave up: true
	// a lost it: true
	// b holds it: 1
	// released: true
}
