package testchild

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
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
	out, runErr := cmd.CombinedOutput()
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
