package matrix

import (
	"os"
	"strings"
	"testing"
)

// TestAudit93ReviewDocsFixedMakefileBenchSaysNumCPU (audit 93; fixed at stop 58, the text below says what was wrong): stop 58 made the
// default procs stop at the usable CPUs (UsableCPUs: the affinity set,
// or fewer under a CPU quota; DefaultProcs, options.go) and updated
// README.md ("... and the usable CPUs with pinned threads"), doc.go and
// docs/benchmarks.md ("1,2,4,... and the usable CPUs"), but the
// Makefile's bench comment still says "both clocks, P=1..NumCPU": on a
// 64-core host with a 2-CPU quota, or under taskset -c 0,1, `make bench`
// runs P = 1, 2, not up to 64.
func TestAudit93ReviewDocsFixedMakefileBenchSaysNumCPU(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatalf("no Makefile beside the bench module: %v", err)
	}
	s := string(mk)
	i := strings.Index(s, "## bench: the contention matrix")
	if i < 0 {
		t.Fatal("the Makefile has no bench comment")
	}
	j := strings.Index(s[i:], "\nbench:")
	if j < 0 {
		t.Fatal("the Makefile's bench comment has no target")
	}
	if c := s[i : i+j]; strings.Contains(c, "NumCPU") {
		t.Errorf("the Makefile's bench comment says the procs go up to NumCPU; DefaultProcs stops at UsableCPUs():\n%s", c)
	}
}
