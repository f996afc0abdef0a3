package matrix

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestBackoff16Script reads bench/backoff16.sh statically, as the run16
// audit does run16.sh (the script takes minutes): every matrix command
// parses with ParseFlags under each default schedule, every schedule is a
// valid -backoff, and the files it leaves in $OUT fit what the device
// tool brings back (at most 8, none in a folder).
func TestBackoff16Script(t *testing.T) {
	b, err := os.ReadFile("../backoff16.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	m := regexp.MustCompile(`SCHEDS=\$\{BACKOFF16_SCHEDULES:-([^}]*)\}`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("no default SCHEDS in backoff16.sh")
	}
	scheds := strings.Fields(m[1])
	if len(scheds) < 3 {
		t.Fatalf("default schedules %q; want several", scheds)
	}
	build := false
	for _, s := range scheds {
		if _, _, err := ParseBackoff(s); err != nil {
			t.Errorf("default schedule %q: %v", s, err)
		}
		if s == "32/1024" {
			build = true
		}
	}
	if !build {
		t.Errorf("default schedules %q leave out the build's 32/1024", scheds)
	}
	joined := strings.ReplaceAll(script, "\\\n", " ")
	n := 0
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		i := strings.Index(line, "bin/matrix ")
		if strings.HasPrefix(line, "#") || i < 0 || strings.HasPrefix(line, "for b in") {
			continue
		}
		rest := line[i:]
		if j := strings.IndexAny(rest, ">"); j >= 0 {
			rest = rest[:j]
		}
		for _, extra := range [][]string{{"-impls", "reference"}, {"-impls", "lockfree", "-backoff", scheds[0]}, {"-impls", "lockfree", "-backoff", "32/1024"}} {
			var args []string
			for _, a := range strings.Fields(rest)[1:] {
				switch a {
				case `"$@"`:
					args = append(args, extra...)
					continue
				case `"$D"`:
					a = "200ms"
				case `"$sw/tmp"`:
					a = "tmp"
				case `""`:
					a = ""
				}
				args = append(args, a)
			}
			if _, err := ParseFlags(args, io.Discard); err != nil {
				t.Errorf("backoff16.sh: %q does not parse: %v", args, err)
			}
		}
		n++
	}
	if n != 3 {
		t.Errorf("found %d matrix commands in backoff16.sh; want 3 (the sweep, the P=16 targets, the shared clock)", n)
	}
	outs := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$OUT/([A-Za-z0-9._-]+)`).FindAllStringSubmatch(script, -1) {
		outs[m[1]] = true
	}
	if len(outs) == 0 || len(outs) > 8 {
		t.Errorf("backoff16.sh writes %d files into $OUT (%v); the device tool brings back 1 to 8", len(outs), outs)
	}
}
