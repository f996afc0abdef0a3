package snapshot_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
)

// crashChild is a child run of this test binary that snapshots to a
// file until it is killed (TestHelperProcess, TestLimiterHelperProcess).
// It prints "start ..." once it has loaded, "saved ..." after each
// durable save and "error ..." when it cannot go on; a goroutine reads
// those lines as they come.
type crashChild struct {
	cmd       *exec.Cmd
	mu        sync.Mutex
	saved     []string  // the fields after "saved" of the last such line; nil before
	savedAt   time.Time // when that line came
	firstSave chan struct{}
	started   chan struct{}
	done      chan error // the child's "error" line, or nil at the end of its output
}

// startCrashChild runs the test named run in a child with env added,
// and waits until it has loaded (and, with waitSave, until it reports
// its first durable save), failing t after 20 s of either.
func startCrashChild(t *testing.T, run string, env []string, waitSave bool) *crashChild {
	t.Helper()
	c := &crashChild{
		cmd:       testchild.Command("-test.run=^"+run+"$", "-test.count=1"),
		firstSave: make(chan struct{}, 1),
		started:   make(chan struct{}),
		done:      make(chan error, 1),
	}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 1 && f[0] == "saved":
				c.mu.Lock()
				c.saved, c.savedAt = f[1:], time.Now()
				c.mu.Unlock()
				select {
				case c.firstSave <- struct{}{}:
				default:
				}
			case len(f) >= 1 && f[0] == "start":
				close(c.started)
			case len(f) >= 1 && f[0] == "error":
				c.done <- errors.New(sc.Text())
				return
			}
		}
		c.done <- nil
	}()
	c.wait(t, c.started, "did not start")
	if waitSave {
		c.wait(t, c.firstSave, "made no save")
	}
	return c
}

// wait waits for ch, killing the child and failing t after 20 s.
func (c *crashChild) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case err := <-c.done:
		c.cmd.Process.Kill()
		t.Fatalf("child %s: it ended first (%v)", what, err)
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("child %s in 20 s", what)
	}
}

// kill sends the child SIGKILL after d and waits for it to die; it
// fails t if the child reported an error. It returns the kill's time.
func (c *crashChild) kill(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	time.Sleep(d)
	at := time.Now()
	c.cmd.Process.Signal(syscall.SIGKILL)
	if err := <-c.done; err != nil {
		t.Fatalf("child: %v", err)
	}
	c.cmd.Wait()
	return at
}

// lastSaved returns the fields of the child's last "saved" line (nil if
// it reported none) and when it came.
func (c *crashChild) lastSaved() ([]string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saved, c.savedAt
}
