package atomiccell_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestInlining guards the hot helpers that the docs and the hot paths
// count on being inlined (the cespare/xxhash practice): it compiles the
// packages with -gcflags=-m and looks for the compiler's "can inline".
// Skipped under -short (it runs the compiler); make test runs it in full
// under -race.
func TestInlining(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler; the full run checks it")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" && runtime.GOARCH == "amd64" {
			t.Fatalf("go toolchain not on PATH: %v", err)
		}
		t.Skipf("go toolchain not on PATH: %v", err)
	}
	want := map[string][]string{
		"github.com/lfgrudge/grudge/atomiccell": {
			"(*Cell).Load", "(*Cell).CompareAndSwap", "Pack", "Word.Score", "Word.Stamp",
			"Elapsed", "Newer", "RoundUp", "roundUpInRange", "stepUp", "(*Rules).Round", "(*Rules).Decay",
		},
		"github.com/lfgrudge/grudge/sketch": {"checkFinite", "(*Sketch).maintain", "Index", "stripeOf"},
		"github.com/lfgrudge/grudge/decay":  {"(*Compiled).ExpFast", "(*Compiled).LinearApply"},
	}
	for pkg, fns := range want {
		out, err := exec.Command(gobin, "build", "-gcflags=-m", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go build -gcflags=-m %s: %v\n%s", pkg, err, out)
		}
		for _, fn := range fns {
			if !strings.Contains(string(out), "can inline "+fn+"\n") && !strings.Contains(string(out), "can inline "+fn+" ") {
				t.Errorf("%s: %s is no longer inlined", pkg, fn)
			}
		}
	}
}
