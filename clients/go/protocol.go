package hashlock

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"time"
)

// DefaultLease is Redisson's watchdog lease and the module's default.
const DefaultLease = 30 * time.Second

// DefaultReplicasTimeout is the REPLICAS wait when WithReplicas gets 0.
const DefaultReplicasTimeout = time.Second

// LockInfo is LOCK.INFO's answer.
type LockInfo struct {
	Owner string
	Holds int64
	// TTL is the lease left; -1 = no expiry.
	TTL     time.Duration
	Waiters int64
	// Keepalive: the lock is tied to a connection (the server renews it).
	Keepalive bool
	// Token is the last fencing token issued for this key (0 if none).
	Token uint64
}

// ms is a duration in whole milliseconds, rounded up, at least 1.
func ms(d time.Duration) int64 {
	m := int64((d + time.Millisecond - 1) / time.Millisecond)
	if m < 1 {
		m = 1
	}
	return m
}

// newOwner is a random (version 4) UUID.
func newOwner() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func asInt(v interface{}) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func unexpected(what string, v interface{}) error {
	return fmt.Errorf("hashlock: unexpected reply: expected %s, got %#v", what, v)
}

// parseGrant reads LOCK.ACQUIRE's reply: the hold count and the token
// (TOKEN: [count, token]); ok false for nil (not acquired).
func parseGrant(v interface{}, token bool) (count int64, tok uint64, ok bool, err error) {
	if v == nil {
		return 0, 0, false, nil
	}
	if token {
		a, isArr := v.([]interface{})
		if !isArr || len(a) != 2 {
			return 0, 0, false, unexpected("[count, token]", v)
		}
		c, ok1 := asInt(a[0])
		t, ok2 := asInt(a[1])
		if !ok1 || !ok2 {
			return 0, 0, false, unexpected("[count, token]", v)
		}
		return c, uint64(t), true, nil
	}
	c, isInt := asInt(v)
	if !isInt {
		return 0, 0, false, unexpected("an integer", v)
	}
	return c, 0, true, nil
}

// parseInfo reads LOCK.INFO (a flat field/value array: the library's
// connections speak RESP2); nil for a free lock.
func parseInfo(v interface{}) (*LockInfo, error) {
	if v == nil {
		return nil, nil
	}
	a, ok := v.([]interface{})
	if !ok || len(a)%2 != 0 {
		return nil, unexpected("a field/value array", v)
	}
	info := &LockInfo{}
	seen := 0
	for i := 0; i < len(a); i += 2 {
		k, _ := a[i].(string)
		if k == "owner" {
			s, isStr := a[i+1].(string)
			if !isStr {
				return nil, unexpected("an owner string", v)
			}
			info.Owner = s
			seen++
			continue
		}
		n, isInt := asInt(a[i+1])
		if !isInt {
			continue
		}
		switch k {
		case "holds":
			info.Holds = n
			seen++
		case "ttl":
			if n < 0 {
				info.TTL = -1
			} else {
				info.TTL = time.Duration(n) * time.Millisecond
			}
			seen++
		case "waiters":
			info.Waiters = n
			seen++
		case "keepalive":
			info.Keepalive = n != 0
		case "token":
			info.Token = uint64(n)
		}
	}
	if seen != 4 {
		return nil, unexpected("owner, holds, ttl and waiters", v)
	}
	return info, nil
}
