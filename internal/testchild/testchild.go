package testchild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// EmulatorEnv names the variable that holds the emulator to run a child
// under (empty or unset: run it directly).
const EmulatorEnv = "GRUDGE_TEST_EMULATOR"

// Emulated reports whether the tests run under an emulator.
func Emulated() bool { return os.Getenv(EmulatorEnv) != "" }

// Command returns the command that runs this test binary again with
// args, through the emulator where there is one.
func Command(args ...string) *exec.Cmd {
	if emu := os.Getenv(EmulatorEnv); emu != "" {
		return exec.Command(emu, append([]string{os.Args[0]}, args...)...)
	}
	return exec.Command(os.Args[0], args...)
}

// Bound is how long CombinedOutput lets a child run before it kills it:
// far beyond any child's work (seconds, emulated), it only turns a hung
// child into a failure that names it, before the parent's own test
// timeout ends the whole package. A child's own -test.timeout is not
// enough: under user-mode emulation a goroutine spinning in a loop
// without calls can keep its P for ever, and then the child's timeout
// never fires.
const Bound = 3 * time.Minute

// CombinedOutput runs cmd as exec.Cmd.CombinedOutput does, but kills it
// after limit (Bound when limit is 0) and then returns what it printed
// with an error that says it hung.
func CombinedOutput(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	if limit <= 0 {
		limit = Bound
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.Bytes(), err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return buf.Bytes(), fmt.Errorf("testchild: the child ran past %v and was killed (hung)", limit)
	}
}

// Isolate runs body in a child process (this test binary again, only
// t's test, verbose, with a 60 s -test.timeout, and killed after Bound),
// so that a body that could hang (a search or a promotion that never
// ends) fails t instead of hanging the whole package; in the child,
// where the variable env holds t's name, it runs body itself. The
// child's failures are t's, with the tail of its output. The race
// runtime's 1 s sleep at a clean exit is turned off in the child.
func Isolate(t *testing.T, env string, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		body(t)
		return
	}
	cmd := Command("-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), env+"="+t.Name(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := CombinedOutput(cmd, 0)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Errorf("child (%v):\n%s", err, Tail(string(out)))
	}
}

// Suite runs the test named entry (a top-level test of this binary that
// runs a suite when the variable env is set) in a child with env=value,
// verbose, and returns whether it passed and the names of the failing
// subtests directly under entry, sorted, each once. short adds
// -test.short. A child that fails without a failing subtest, or whose
// race detector fires, is an error: the harness is broken, not the
// suite catching something.
func Suite(entry, env, value string, short bool) (passed bool, failed []string, err error) {
	args := []string{"-test.run=^" + entry + "$", "-test.count=1", "-test.v", "-test.timeout=120s"}
	if short {
		args = append(args, "-test.short")
	}
	cmd := Command(args...)
	cmd.Env = append(os.Environ(), env+"="+value)
	out, runErr := CombinedOutput(cmd, 0)
	text := string(out)
	if strings.Contains(text, "WARNING: DATA RACE") {
		return false, nil, fmt.Errorf("child %s: the race detector fired (a harness bug, not the suite catching it):\n%s", value, Tail(text))
	}
	if runErr == nil {
		return true, nil, nil
	}
	re := regexp.MustCompile(`--- FAIL: ` + regexp.QuoteMeta(entry) + `/([A-Za-z0-9]+)`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			failed = append(failed, m[1])
		}
	}
	if len(failed) == 0 {
		return false, nil, fmt.Errorf("child %s failed without a failing suite check (%v):\n%s", value, runErr, Tail(text))
	}
	sort.Strings(failed)
	return false, failed, nil
}

// Tail returns the last 4000 bytes of s, marked as cut where it is.
func Tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
