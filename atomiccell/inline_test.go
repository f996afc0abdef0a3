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
		"github.com/lfgrudge/grudge/internal/atom": {
			"(*Cell).Load", "(*Cell).CompareAndSwap", "Pack", "Word.Score", "Word.Stamp",
			"Elapsed", "Newer", "RoundUp", "roundUpInRange", "stepUp", "(*Rules).Round", "(*Rules).Decay", "Release",
		},
		"github.com/lfgrudge/grudge/internal/law":  {"(*Compiled).ExpFast", "(*Compiled).LinearApply"},
		"github.com/lfgrudge/grudge/internal/core": {"CheckFinite", "CheckTry", "(*Sketch).maintain", "Index", "stripeOf"},
		// The public packages are faces over internal ones: each method is
		// one forwarding call that inlines, so it costs what the engine's
		// does.
		"github.com/lfgrudge/grudge/atomiccell": {
			"(*Cell).Load", "(*Cell).Store", "(*Cell).CompareAndSwap", "(*Cell).Add", "Pack",
			"Word.Score", "Word.Stamp", "Elapsed", "Newer", "RoundUp", "(*Rules).Next", "(*Rules).Value",
		},
		"github.com/lfgrudge/grudge/sketch":  faceMethods("Sketch"),
		"github.com/lfgrudge/grudge/rotator": faceMethods("Rotator"),
		// The grudge-compatible root: its zero-value checks must keep
		// the hot methods inlinable (audit 126: TryUpdate through a
		// helper was not). Rotator.TryUpdate never was (cost 98).
		"github.com/lfgrudge/grudge": {
			"(*Sketch).Update", "(*Sketch).Query", "(*Sketch).UpdateAndQuery", "(*Sketch).TryUpdate",
			"(*Rotator).Update", "(*Rotator).Query", "(*Rotator).UpdateAndQuery",
		},
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

// faceMethods returns the hot methods of sketch.Sketch or
// rotator.Rotator (typ): the grudge-shaped ones, their string twins and
// their At forms.
func faceMethods(typ string) []string {
	var fns []string
	for _, op := range []string{"Update", "Query", "UpdateAndQuery", "TryUpdate"} {
		for _, form := range []string{"", "String", "At"} {
			fns = append(fns, "(*"+typ+")."+op+form)
		}
	}
	return fns
}
