package testchild_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
)

const childEnv = "GRUDGE_TESTCHILD_SELF"

// TestCombinedOutput runs this test binary as its own child twice: once
// to print and exit, once to hang; the second must come back killed,
// with what it printed and an error that says it hung.
func TestCombinedOutput(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "exit":
		println("child says hello")
		os.Exit(0)
	case "hang":
		println("child hangs")
		time.Sleep(time.Hour)
	}
	run := func(mode string, limit time.Duration) (string, error) {
		cmd := testchild.Command("-test.run=^TestCombinedOutput$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		out, err := testchild.CombinedOutput(cmd, limit)
		return string(out), err
	}
	if out, err := run("exit", 0); err != nil || !strings.Contains(out, "child says hello") {
		t.Fatalf("a child that exits: %v, output %q", err, out)
	}
	out, err := run("hang", 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "hung") {
		t.Fatalf("a hanging child: err %v, want the hung error; output %q", err, out)
	}
	if !strings.Contains(out, "child hangs") {
		t.Fatalf("a hanging child's output %q lost what it printed", out)
	}
}
