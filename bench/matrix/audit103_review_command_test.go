package matrix

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// a103Sh runs script under `sh -c` with env (nil: the test's) and returns
// its stdout.
func a103Sh(t *testing.T, script string, env []string) (string, error) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	cmd := exec.Command(sh, "-c", script)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		return out.String(), &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: errb.Bytes()}
	}
	return out.String(), nil
}

// TestAudit103ReviewCommandShellRoundTrip (passes): every argument of
// the recorded command comes back word for word through a real `sh -c`
// (printf "%s\0" of the quoted words, compared with the arguments):
// empty, blanks, tabs, newlines, quotes of both kinds, backslashes,
// $ and backticks, globs, a leading ~ and #, braces, !, ; | & < > ( ),
// non-ASCII and invalid UTF-8, and the characters left unquoted
// (@%+=:,./_-), including ~ and = in the middle of a word.
func TestAudit103ReviewCommandShellRoundTrip(t *testing.T) {
	args := []string{"bin/matrix", "", " ", "a b", "\t", "a\nb", "'", "''", "a'b", `"`, `a"b'c`, `\`, `a\\b`, `\'`,
		"$HOME", "${PATH}", "$(echo x)", "`echo x`", "*", "?", "[a]", "~", "~/x", "a=~/x", "x:~/y", "#c", "a#b",
		"{a,b}", "!", "!!", ";", "a|b", "&", "<", ">", "(", ")", "héllo", "\xff\xfe", "-out=", "--", "-",
		"@%+=:,./_-", "a,b", "%s", "=", "==x", "-impls=lockfree, reference", "\\n", "x\x01y"}
	got := command(args)
	out, err := a103Sh(t, `printf '%s\0' `+got, nil)
	if err != nil {
		t.Fatalf("sh -c on %q: %v", got, err)
	}
	words := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if !slices.Equal(words, args) {
		for i := range max(len(words), len(args)) {
			var w, a string
			if i < len(words) {
				w = words[i]
			}
			if i < len(args) {
				a = args[i]
			}
			if w != a {
				t.Errorf("word %d: sh read %q; argument was %q", i, w, a)
			}
		}
	}
	// Unquoted exactly when plain (as shlex.quote).
	for _, a := range []string{"lockfree,reference", "-count", "5", "/tmp/x.json", "a=b"} {
		if q := shellQuote(a); q != a {
			t.Errorf("shellQuote(%q) = %q; want it unchanged", a, q)
		}
	}
	if got := command([]string{"/tmp/go-build9/b001/exe/matrix", "-out", ""}); got != "go run ./cmd/matrix -out ''" {
		t.Errorf("go run binary: command = %q", got)
	}
	if got := command(nil); got != "" {
		t.Errorf("command(nil) = %q", got)
	}
}

// TestAudit103ReviewFixedCommandFirstWordAssignment (audit 103; fixed at stop 60, the text
// below says what was wrong) (finding, low severity).
//
// Doc says (bench/matrix/meta.go, command): "renders the command line
// so that it can be pasted into a POSIX shell and run again"; shellQuote:
// "returns a as one POSIX shell word: unchanged when it is non-empty and
// made only of letters, digits and @%+=:,./_-".
//
// Code does: leaves '=' unquoted in every word, the first included. A
// first word of the form NAME=value is not a command word in a POSIX
// shell but a variable assignment (XCU 2.9.1): the pasted line sets a
// variable and runs the second argument as the command. So
// os.Args = ["RUN=1", "a b"] (a binary on PATH named RUN=1) is recorded
// as `RUN=1 'a b'`, which runs the program "a b" instead.
//
// Minimal repro: an executable "RUN=1" on PATH printing its arguments;
// sh -c command(["RUN=1", "a b"]) fails ("a b: not found") instead of
// printing "a b".
//
// Suggested fix: in command, quote the first word also when it has a
// '=' (or whenever shellQuote leaves it unchanged and it holds '='):
// `'RUN=1' 'a b'` runs RUN=1.
func TestAudit103ReviewFixedCommandFirstWordAssignment(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "RUN=1")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"RUN=1", "a b"}
	got := command(args)
	out, err := a103Sh(t, got, []string{"PATH=" + dir + string(os.PathListSeparator) + "/usr/bin:/bin"})
	if err != nil || out != "a b\n" {
		t.Errorf("os.Args %q recorded as %q; sh -c runs it as: out %q, err %v (want the program RUN=1 run with \"a b\")", args, got, out, err)
	}
}

// TestAudit103ReviewCompleteRunReportUnchanged (passes): for a complete
// run (Stopped empty) the report says Count repeats, marks no cell, and
// a stopped run whose every cell got its Count prints the same apart
// from the incomplete line. (Checked against 8c7bf99^ by hand on
// docs/runs/16core-2026-12-04/results.json: byte-identical, Count 3, 1
// and 0, and stopped with every cell complete.)
func TestAudit103ReviewCompleteRunReportUnchanged(t *testing.T) {
	b, err := os.ReadFile("../../docs/runs/16core-2026-12-04/results.json")
	if err != nil {
		t.Fatal(err)
	}
	md := func(stopped string) string {
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		rep.Meta.Stopped = stopped
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, &rep); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	full := md("")
	if strings.Contains(full, "[n=") || strings.Contains(full, "asked for") || !strings.Contains(full, "- cells: 3 repeats of") ||
		!strings.Contains(full, "medians of 3 repeats") {
		t.Errorf("complete run's report changed:\n%s", full)
	}
	stopped := md("stopped after 9 of 9 cell runs")
	stopped = strings.Replace(stopped, "- **incomplete**: stopped after 9 of 9 cell runs\n", "", 1)
	if stopped != full {
		t.Errorf("a stopped run whose cells all got Count prints differently from a complete one")
	}
}
