// Package hashlock is the Go library of the hashlock Redis/Valkey module:
// reentrant, Redisson-compatible locks whose waiting happens in the
// server's FIFO queue (LOCK.ACQUIRE ... BLOCK), on go-redis v9.
//
//	locks := hashlock.New(rdb) // rdb: a *redis.Client or *redis.ClusterClient
//	defer locks.Close()
//	held, err := locks.NewLock("orders:42").Acquire(ctx) // waits while ctx allows
//	if err != nil {
//		return err
//	}
//	defer held.Release(context.Background())
//	select {
//	case <-held.Done(): // the lock was lost: stop
//	case <-work():
//	}
//
// What the library does for a lock:
//
//   - Every LOCK.* call runs on a connection the Client owns, from a pool per
//     server; a lock released cleanly gives its connection back, so steady
//     use opens no new connections.
//   - A wait is abandoned by cancelling its context: its connection is
//     closed (the server forgets the waiter) and a grant already on its way
//     is given back at once.
//   - KEEPALIVE by default: the lock is tied to its connection, renewed by
//     the server while it is open and released the moment it closes.
//   - Hold.Done is the loss signal: it closes when the connection closes or
//     fails, the server shuts down, or the lock is force-released, expired
//     or taken (seen as it happens through the module's lifecycle keyspace
//     events when the server sends them, else by a periodic check);
//     Hold.Err says why.
//   - Election: leader election on a key (Campaign, Resign, Leader,
//     Observe), on the same lock, its terms numbered by fencing tokens and
//     its observers driven by the lifecycle events.
//   - Errors match sentinels with errors.Is: ErrNotAcquired, ErrLockLost,
//     ErrNotOwner, ErrNotLock, ErrWrongType, ErrNoReplicas,
//     ErrModuleNotLoaded, ...
//
// The pieces other primitives will share (the pool and routing on Client,
// the cancellable grant with its give-back, the tenure with its loss signal
// and watcher, the event subscriptions, the backlog of background work) are
// not specific to Lock.
package hashlock
