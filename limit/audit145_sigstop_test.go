//go:build linux

package limit_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit145NoFalseNoTimerAcrossSIGSTOP: a process stopped (SIGSTOP,
// as a debugger, a container freeze or a VM pause does) in the middle of
// default-clock waits is not inside a testing/synctest bubble: its timers
// fire late, never early against the runtime's clock, so the bubble check
// of WaitN must not answer ErrNoTimer. A child runs ten 20 ms waits and
// prints each result; the parent stops it for 150 ms in the middle.
func TestAudit145NoFalseNoTimerAcrossSIGSTOP(t *testing.T) {
	if os.Getenv(a145Env) == t.Name() {
		l, err := limit.New(50, 1)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("A145READY")
		for i := range 11 {
			if err := l.Wait(context.Background(), "k"); err != nil {
				fmt.Printf("A145ERR wait %d: %v\n", i, err)
			}
		}
		fmt.Println("A145DONE")
		return
	}
	if testchild.Emulated() {
		t.Skip("signals to an emulated child stop the emulator, not the program")
	}
	cmd := testchild.Command("-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), a145Env+"="+t.Name())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "A145READY" {
			break
		}
	}
	time.Sleep(30 * time.Millisecond) // inside the second or third wait
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	werr := cmd.Wait()
	all := strings.Join(lines, "\n")
	if werr != nil || !strings.Contains(all, "A145DONE") || strings.Contains(all, "A145ERR") {
		t.Errorf("default-clock waits across a SIGSTOP of 150 ms (child %v):\n%s\n%s", werr, testchild.Tail(all), testchild.Tail(errBuf.String()))
	}
}
