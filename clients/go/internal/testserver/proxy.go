package testserver

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections to a server; the tests use it to make a
// connection go silent (Pause) or be reset (Reset) as a network would.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu     sync.Mutex
	gate   chan struct{} // closed while traffic flows
	pairs  [][2]net.Conn
	closed bool
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.pairs = append(p.pairs, [2]net.Conn{client, server})
		p.mu.Unlock()
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *Proxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate // held back while paused
			if _, werr := to.Write(buf[:n]); werr != nil {
				from.Close()
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				from.Close()
			}
			to.Close()
			return
		}
	}
}

// Pause stops forwarding in both directions; the sockets stay open, as
// behind a network that silently drops everything.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Resume forwards again (what was held back goes through).
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Reset resets every connection: the client side gets a TCP RST, the
// server side is closed.
func (p *Proxy) Reset() {
	p.mu.Lock()
	pairs := p.pairs
	p.pairs = nil
	p.mu.Unlock()
	for _, pair := range pairs {
		if tc, ok := pair[0].(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		pair[0].Close()
		pair[1].Close()
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Resume()
	p.Reset()
}
