package sketch_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAudit101BenchFixedABRecipeIsNotABBA (audit 101; fixed at stop 60,
// the text below says what was wrong; the recipe's order now flips each
// round, and the test runs the recipe's loop under bash).
//
// Doc (docs/benchmarks.md, "A/B of a change: interleaved, pinned, and
// by instruction count", the recipe for this package's ab_test.go): "#
// 16 rounds, old and new alternating (ABBA), pinned to one CPU", and
// docs/design.md's tables cite results as "20 runs ABBA", "12 runs each,
// ABBA". ABBA (old new new old ...) puts each binary first and second
// equally often, so a linear drift of the machine (warming, a neighbour
// ramping up) cancels in the comparison.
//
// Code (the recipe's shell): `for i in $(seq 1 16); do for v in old
// new; do ... done; done` runs old, new, old, new, ... : ABAB. "new"
// always runs second, right after "old", in every round, so any drift
// or any after-effect of the previous run (page cache, frequency, the
// other binary's heat) lands on new alone, the bias ABBA exists to
// cancel.
//
// Repro: expand the recipe's loops as a shell does (the inner list does
// not depend on the round) and compare with ABBA.
func TestAudit101BenchFixedABRecipeIsNotABBA(t *testing.T) {
	b, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "16 rounds in ABBA order")
	if i < 0 {
		t.Fatal("the A/B recipe's ABBA comment is gone from docs/benchmarks.md")
	}
	rest := doc[i:]
	// The recipe's loop, from its for to the done before benchstat, run
	// by bash with each measurement replaced by an echo of its binary.
	j, k := strings.Index(rest, "for i in"), strings.Index(rest, "benchstat old.txt new.txt")
	if j < 0 || k < j {
		t.Fatalf("recipe's loop not found after the ABBA comment:\n%.400s", rest)
	}
	loop := regexp.MustCompile(`taskset [^\n]*`).ReplaceAllLiteralString(rest[j:k], `echo $v`)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	out, err := exec.Command(bash, "-c", loop).CombinedOutput()
	if err != nil {
		t.Fatalf("the recipe's loop does not run under bash: %v\n%s\n%s", err, loop, out)
	}
	order := strings.Fields(string(out))
	var abba []string
	for r := range 16 {
		if r%2 == 0 {
			abba = append(abba, "old", "new")
		} else {
			abba = append(abba, "new", "old")
		}
	}
	if !slices.Equal(order, abba) {
		t.Errorf("the recipe labelled ABBA runs %v..., want %v...", order[:min(8, len(order))], abba[:8])
	}
}
