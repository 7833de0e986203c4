package hashlock

// ConnID is the server's CLIENT ID of the connection h's lock is tied to
// (0: none). For tests.
func ConnID(h *Hold) int64 {
	if ln := h.t.tied(); ln != nil {
		return ln.conn.ID()
	}
	return 0
}

// ConnAddr is the server address of that connection ("" if none).
func ConnAddr(h *Hold) string {
	if ln := h.t.tied(); ln != nil {
		return ln.conn.Addr()
	}
	return ""
}

// LeadershipConnID is the CLIENT ID of the connection a term is tied to.
func LeadershipConnID(l *Leadership) int64 { return ConnID(l.h) }

// Subscribed reports whether c's subscriber connection has key's keyspace
// channel subscribed now (database 0).
func Subscribed(c *Client, key string) bool {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	for _, n := range c.hub.nodes {
		n.mu.Lock()
		st := n.chans[channelOf(0, key)]
		ok := n.conn != nil && st != nil && !st.active.IsZero()
		n.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// LeaseConnID is the CLIENT ID of the connection a lease is tied to (0: none).
func LeaseConnID(l *Lease) int64 {
	if ln := l.t.tied(); ln != nil {
		return ln.conn.ID()
	}
	return 0
}
