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

// TestReadme follows README.md as a reader would: a module of its own, the
// two install lines, the example program as written (only the address is
// changed); the program must run and ship the order, leaving the lock free.
func TestReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(sh|go)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	var install, program string
	for _, b := range blocks {
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
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// The toolchain that built this test, else the go on PATH.
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal("no go command found to build the README's example")
		}
	}
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	write := func(addr string) {
		t.Helper()
		code := strings.Replace(program, `"localhost:6380"`, `"`+addr+`"`, 1)
		if code == program {
			t.Fatal(`README example: no "localhost:6380" to point at the test server`)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The reader's program, then the install lines in its module.
	write(servers[0].Addr)
	run(goBin, "mod", "init", "readme")
	for _, line := range strings.Split(strings.TrimSpace(install), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "/path/to/hashlock/clients/go", here))
		if len(f) == 0 || f[0] != "go" {
			t.Fatalf("README install line %q: not a go command", line)
		}
		run(goBin, f[1:]...)
	}
	for _, s := range servers {
		t.Run(s.Kind, func(t *testing.T) {
			write(s.Addr)
			out := run(goBin, "run", ".")
			if out != "shipped order 42\n" {
				t.Fatalf("the example printed %q", out)
			}
			e := newEnv(t, s)
			if i := e.info("orders:42"); i != nil {
				t.Fatalf("the example left the lock held: %v", i)
			}
		})
	}
}
