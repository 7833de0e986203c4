package hashlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// readmeBlocks returns README.md's first ```sh block (the install lines)
// and first ```go block (the example program).
func readmeBlocks(t *testing.T) (install, program string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range regexp.MustCompile("(?s)```(sh|go)\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if b[1] == "sh" && install == "" {
			install = b[2]
		}
		if b[1] == "go" && program == "" {
			program = b[2]
		}
	}
	if !strings.Contains(install, "/path/to/hashlock/clients/go") || !strings.HasPrefix(program, "package main") {
		t.Fatalf("README: install lines %q or example program not found", install)
	}
	return install, program
}

// goCommand is the toolchain that built this test, else the go on PATH.
func goCommand(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err == nil {
		return goBin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command found to build the README's examples")
	}
	return goBin
}

// readerModule is a reader's module as README.md sets it up: `go mod
// init`, a main.go, then README's install lines. It returns a function
// that runs program (with "localhost:6380" replaced by addr) in it and
// returns what it printed.
func readerModule(t *testing.T, firstProgram, firstAddr string) func(program, addr string) string {
	t.Helper()
	install, _ := readmeBlocks(t)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	goBin := goCommand(t)
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	write := func(program, addr string) {
		t.Helper()
		code := strings.Replace(program, `"localhost:6380"`, `"`+addr+`"`, 1)
		if code == program {
			t.Fatal(`no "localhost:6380" in the program to point at the test server`)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(firstProgram, firstAddr)
	run("mod", "init", "readme")
	for _, line := range strings.Split(strings.TrimSpace(install), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "/path/to/hashlock/clients/go", here))
		if len(f) == 0 || f[0] != "go" {
			t.Fatalf("README install line %q: not a go command", line)
		}
		run(f[1:]...)
	}
	return func(program, addr string) string {
		t.Helper()
		write(program, addr)
		return run("run", ".")
	}
}

// TestReadme follows README.md as a reader would: a module of its own, the
// install lines, the example program as written (only the address is
// changed); it must ship the order and leave the lock free, on each server.
func TestReadme(t *testing.T) {
	_, program := readmeBlocks(t)
	runProgram := readerModule(t, program, servers[0].Addr)
	for _, s := range servers {
		t.Run(s.Kind, func(t *testing.T) {
			if out := runProgram(program, s.Addr); out != "shipped order 42\n" {
				t.Fatalf("the example printed %q", out)
			}
			if i := newEnv(t, s).info("orders:42"); i != nil {
				t.Fatalf("the example left the lock held: %v", i)
			}
		})
	}
}

// TestRootReadmeSnippet runs the Go snippet of the repository README's
// client section, with the variables it assumes declared around it.
func TestRootReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	at := strings.Index(text, "Go: install with")
	if at < 0 {
		t.Fatal("README.md: no Go install line in the client section")
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(text[at:])
	if m == nil {
		t.Fatal("README.md: no Go snippet after the install line")
	}
	program := `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"hashlock"
)

func shipOrder(id int) { fmt.Println("shipped order", id) }

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380"})
	defer rdb.Close()
` + m[1] + `	if err != nil {
		panic(err)
	}
	_ = time.Second
}
`
	out := readerModule(t, program, servers[0].Addr)(program, servers[0].Addr)
	if out != "shipped order 42\n" {
		t.Fatalf("the snippet printed %q", out)
	}
}

// TestReadmeElection runs README.md's leader election program as written
// (only the address is changed) on each server: it observes, campaigns,
// leads and resigns, and the observer sees each change in order.
func TestReadmeElection(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var program string
	for _, b := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(b[1], "NewElection") && strings.HasPrefix(b[1], "package main") {
			program = b[1]
		}
	}
	if program == "" {
		t.Fatal("README.md: no election program")
	}
	runProgram := readerModule(t, program, servers[0].Addr)
	want := regexp.MustCompile(`^observer: no-leader
observer: elected node-a term \d{16,}
leading; writes carry term \d{16,}
observer: revoked node-a term \d{16,}
observer: no-leader
$`)
	for _, s := range servers {
		t.Run(s.Kind, func(t *testing.T) {
			out := runProgram(program, s.Addr)
			if !want.MatchString(out) {
				t.Fatalf("the election example printed:\n%s", out)
			}
			if i := newEnv(t, s).info("billing:leader"); i != nil {
				t.Fatalf("the example left the election led: %v", i)
			}
		})
	}
}

// TestRootReadmeElection runs the Go snippet of the repository README's
// "Leader election" section as the body of a function, with the variables
// and the helper it assumes declared around it.
func TestRootReadmeElection(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	at := strings.Index(text, "\n## Leader election")
	if at < 0 {
		t.Fatal("README.md: no Leader election section")
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(text[at:])
	if m == nil {
		t.Fatal("README.md: no Go snippet in the Leader election section")
	}
	program := `package main

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"
	"hashlock"
)

func lead(ctx context.Context, term uint64) { fmt.Println("led, term > 0:", term > 0, ctx.Err() == nil) }

func run(ctx context.Context, rdb *redis.Client) error {
` + m[1] + `}

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380"})
	defer rdb.Close()
	if err := run(ctx, rdb); err != nil {
		log.Fatal(err)
	}
}
`
	out := readerModule(t, program, servers[1].Addr)(program, servers[1].Addr)
	if out != "led, term > 0: true true\n" {
		t.Fatalf("the snippet printed %q", out)
	}
	if i := newEnv(t, servers[1]).info("billing:leader"); i != nil {
		t.Fatalf("the snippet left the election led: %v", i)
	}
}

// TestReadmeFamily runs README.md's semaphore/latch/read-write/multi-lock
// program as written (only the address is changed) on each server.
func TestReadmeFamily(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var program string
	for _, b := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(b[1], "NewSemaphore") && strings.HasPrefix(b[1], "package main") {
			program = b[1]
		}
	}
	if program == "" {
		t.Fatal("README.md: no family program")
	}
	runProgram := readerModule(t, program, servers[0].Addr)
	for _, s := range servers {
		t.Run(s.Kind, func(t *testing.T) {
			e := newEnv(t, s)
			e.rdb.Del(e.ctx, "render:licenses", "{render:licenses}:timeout", "batch:7:ready", "catalog", "{acct}:alice", "{acct}:bob")
			out := runProgram(program, s.Addr)
			want := "rendering with 1 license\nmerging\nreading the catalog\ntransferring alice -> bob\n"
			if out != want {
				t.Fatalf("the example printed %q", out)
			}
			if v := e.rdb.Get(e.ctx, "render:licenses").Val(); v != "2" {
				t.Fatalf("the permit was not returned: %q", v)
			}
			if e.rdb.Exists(e.ctx, "catalog", "{acct}:alice", "{acct}:bob").Val() != 0 {
				t.Fatal("the example left something held")
			}
		})
	}
}
