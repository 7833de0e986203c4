package hashlock

import (
	"errors"
	"fmt"
	"strings"

	"hashlock/internal/wire"
)

// Errors to test with errors.Is. Server error replies are *ServerError
// values that match the sentinel of their code; a lost lock is a
// *LostError that matches ErrLockLost (and ErrNotOwner when the server said
// NOTOWNER).
var (
	// ErrNotAcquired: the lock was not taken — another owner holds it
	// (TryAcquire), the wait ran out (the error then also matches
	// context.DeadlineExceeded when the context's deadline set the wait),
	// or the server ended the wait (CLIENT UNBLOCK).
	ErrNotAcquired = errors.New("hashlock: not acquired")
	// ErrLockLost: this owner does not hold the lock any more — its
	// connection closed, it was force-released, its lease ran out, or a
	// renewal or re-entry found it gone. Stop touching what it protected.
	ErrLockLost = errors.New("hashlock: lock lost")
	// ErrReleased: Err of a hold whose lock was released cleanly, and the
	// error of a second Release of the same hold.
	ErrReleased = errors.New("hashlock: released")
	// ErrModuleNotLoaded: the server does not know the LOCK.* commands.
	ErrModuleNotLoaded = errors.New("hashlock: the hashlock module is not loaded")
	// ErrClosed: the hashlock Client was closed.
	ErrClosed = errors.New("hashlock: client closed")
	// ErrUnsupportedClient: New was given a client that is neither a
	// *redis.Client (standalone or failover) nor a *redis.ClusterClient.
	ErrUnsupportedClient = errors.New("hashlock: unsupported go-redis client (want *redis.Client or *redis.ClusterClient)")

	// Server error codes (matched by *ServerError).
	ErrNotOwner   = errors.New("hashlock: NOTOWNER")
	ErrNotLock    = errors.New("hashlock: NOTLOCK")
	ErrWrongType  = errors.New("hashlock: WRONGTYPE")
	ErrNoReplicas = errors.New("hashlock: NOREPLICAS")
	ErrReadOnly   = errors.New("hashlock: READONLY")
	ErrCrossSlot  = errors.New("hashlock: CROSSSLOT")
	ErrUnblocked  = errors.New("hashlock: UNBLOCKED")
	// ErrNoUpgrade: a ReadWriteLock owner that holds it for reading only
	// asked to write (an upgrade deadlocks: release the reads first).
	// Nothing changed.
	ErrNoUpgrade = errors.New("hashlock: NOUPGRADE")
	// ErrNotSemaphore / ErrNotLatch: the key holds a string that is not a
	// count. Nothing changed.
	ErrNotSemaphore = errors.New("hashlock: NOTSEMAPHORE")
	ErrNotLatch     = errors.New("hashlock: NOTLATCH")
)

var codes = map[string]error{
	"NOTOWNER":     ErrNotOwner,
	"NOTLOCK":      ErrNotLock,
	"WRONGTYPE":    ErrWrongType,
	"NOREPLICAS":   ErrNoReplicas,
	"READONLY":     ErrReadOnly,
	"CROSSSLOT":    ErrCrossSlot,
	"UNBLOCKED":    ErrUnblocked,
	"NOUPGRADE":    ErrNoUpgrade,
	"NOTSEMAPHORE": ErrNotSemaphore,
	"NOTLATCH":     ErrNotLatch,
}

// ConnError is a failure of a connection the library owns (not a server
// reply). Sent reports whether the command may have reached the server.
// It unwraps to the cause: context.Canceled or context.DeadlineExceeded
// for an abandoned call, io.EOF or a net error for a dead connection.
type ConnError = wire.Error

// ServerError is an error reply of the server. It matches (errors.Is) the
// sentinel of its code (ErrNotOwner, ErrNotLock, ErrWrongType,
// ErrNoReplicas, ErrReadOnly, ErrCrossSlot, ErrUnblocked, ErrNoUpgrade,
// ErrNotSemaphore, ErrNotLatch) and ErrModuleNotLoaded for an unknown
// LOCK.*, RWLOCK.*, SEMAPHORE.* or LATCH.* command. It is a go-redis
// redis.Error too.
type ServerError struct {
	// Code is the first word of the reply: NOTOWNER, NOTLOCK, ERR, ...
	Code string
	// Reply is the whole error reply as the server sent it.
	Reply string
	// Addr is the server that sent it.
	Addr string
}

func (e *ServerError) Error() string {
	if e.moduleMissing() {
		return fmt.Sprintf("hashlock: the hashlock module is not loaded on %s (the server answered: %s)", e.Addr, e.Reply)
	}
	return e.Reply
}

// RedisError makes a *ServerError a go-redis redis.Error.
func (e *ServerError) RedisError() {}

// Is matches the sentinel of the error's code.
func (e *ServerError) Is(target error) bool {
	if target == ErrModuleNotLoaded {
		return e.moduleMissing()
	}
	s, ok := codes[e.Code]
	return ok && s == target
}

func (e *ServerError) moduleMissing() bool {
	lower := strings.ToLower(e.Reply)
	return e.Code == "ERR" && strings.Contains(lower, "unknown command") &&
		(strings.Contains(lower, "lock.") || strings.Contains(lower, "semaphore.") || strings.Contains(lower, "latch."))
}

func serverError(addr string, reply wire.ServerError) *ServerError {
	s := string(reply)
	code := s
	if i := strings.IndexByte(s, ' '); i >= 0 {
		code = s[:i]
	}
	return &ServerError{Code: code, Reply: s, Addr: addr}
}

// LostError says a held lock was lost, and why. It matches ErrLockLost;
// Unwrap gives the cause (a *ServerError NOTOWNER, a *ConnError, ...),
// when there is one.
type LostError struct {
	Name   string
	Owner  string
	Reason string
	Err    error
}

func (e *LostError) Error() string {
	msg := fmt.Sprintf("hashlock: lock %q lost by owner %q: %s", e.Name, e.Owner, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *LostError) Unwrap() error { return e.Err }

// Is matches ErrLockLost.
func (e *LostError) Is(target error) bool { return target == ErrLockLost }
