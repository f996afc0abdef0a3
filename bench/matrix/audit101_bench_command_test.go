package matrix

import (
	"slices"
	"strings"
	"testing"
)

// a101ShellSplit splits a POSIX shell command line into words: blanks
// separate, '...' and "..." quote (an empty pair is an empty word), and
// a backslash escapes the next character outside single quotes.
func a101ShellSplit(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
		case c == '\\' && i+1 < len(s):
			inWord = true
			i++
			cur.WriteByte(s[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestAudit101BenchFixedCommandLosesEmptyAndSpacedArgs (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc: the harness reports "the command" with every result (README.md,
// docs/benchmarks.md: "Numbers, with the command, the hardware and the
// Go version they come from"; Meta.Command; meta.go: "command renders
// the command line"), printed as "- command: `...`" at the top of every
// results.md, in results.json/csv and in the plots' metadata, so a run
// can be repeated.
//
// Code: command() joins os.Args with single blanks, no quoting, then
// TrimSpace. An empty argument vanishes and an argument with a blank
// splits. bench/run16.sh's and bench/backoff16.sh's own steps pass
// `-out "" -plots=false`: the recorded command reads `... -out
// -plots=false`, which, pasted into a shell, makes "-plots=false" the
// output folder and plots on; `-out ""` at the end is dropped entirely
// (`... -out`: "flag needs an argument"). `-impls "lockfree, reference"`
// (parseNames trims the blank, so the run accepted it) comes back as two
// words, the second an unexpected argument.
//
// Repro: shell-split command(args) and compare with args[1:].
func TestAudit101BenchFixedCommandLosesEmptyAndSpacedArgs(t *testing.T) {
	for _, args := range [][]string{
		{"bin/matrix", "-clock", "both", "-out", "", "-plots=false"},
		{"bin/matrix", "-duration", "200ms", "-out", ""},
		{"bin/matrix", "-impls", "lockfree, reference", "-out", "/tmp/my results"},
	} {
		got := command(args)
		words := a101ShellSplit(got)
		if !slices.Equal(words, args) {
			t.Errorf("os.Args %q recorded as command %q, which a shell runs as %q", args, got, words)
		}
	}
}

// TestAudit101BenchCommandPlainArgsRoundTrip (passes): plain arguments
// and the go run rewrite come back word for word.
func TestAudit101BenchCommandPlainArgsRoundTrip(t *testing.T) {
	args := []string{"/tmp/go-build42/b001/exe/matrix", "-out", "/work/main/bench-results", "-impls", "lockfree,reference", "-count", "5"}
	want := append([]string{"go", "run", "./cmd/matrix"}, args[1:]...)
	if got := a101ShellSplit(command(args)); !slices.Equal(got, want) {
		t.Errorf("command(%q) splits as %q; want %q", args, got, want)
	}
}
