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
