package matrix

import (
	"io"
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
	script, _ := scriptSteps(t, "../backoff16.sh", nil)
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
	n := 0
	for _, extra := range [][]string{{"-impls", "reference"}, {"-impls", "lockfree", "-backoff", scheds[0]}, {"-impls", "lockfree", "-backoff", "32/1024"}} {
		_, steps := scriptSteps(t, "../backoff16.sh", map[string][]string{`"$@"`: extra, `"$D"`: {"200ms"}, `"$sw/tmp"`: {"tmp"}})
		for _, args := range steps {
			if _, err := ParseFlags(args, io.Discard); err != nil {
				t.Errorf("backoff16.sh: %q does not parse: %v", args, err)
			}
		}
		n = len(steps)
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
