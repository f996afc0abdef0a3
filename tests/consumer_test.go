package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// forbidden are the modules a user of the library must never get in
// their module graph: plotting (the bench module's), test-only and
// measurement modules, the examples' routers.
var forbidden = []string{
	"gonum", "go-fonts", "go-latex", "go-pdf", "sbinet/gg", "svgo", "freetype",
	"golang.org/x/image", "porcupine", "rapid", "hrtime", "goleak", "golang.org/x/time",
	// The routers of the examples module and the peers of the benchmarks.
	"go-chi", "labstack/echo", "gin-gonic", "maypok86/otter", "golang-lru", "sethvargo/go-limiter",
	// The Prometheus collector of the examples module (examples/promstats).
	"prometheus",
}

// consumerMain imports every public package of the module.
const consumerMain = `package main

import (
	_ "github.com/lfgrudge/grudge"
	_ "github.com/lfgrudge/grudge/asm"
	_ "github.com/lfgrudge/grudge/atomiccell"
	_ "github.com/lfgrudge/grudge/decay"
	_ "github.com/lfgrudge/grudge/grudgetest"
	_ "github.com/lfgrudge/grudge/limit"
	_ "github.com/lfgrudge/grudge/limit/httplimit"
	_ "github.com/lfgrudge/grudge/limit/limittest"
	_ "github.com/lfgrudge/grudge/meter"
	_ "github.com/lfgrudge/grudge/rotator"
	_ "github.com/lfgrudge/grudge/sketch"
	_ "github.com/lfgrudge/grudge/sketch/reference"
	_ "github.com/lfgrudge/grudge/sketch/sketchtest"
	_ "github.com/lfgrudge/grudge/sketch/snapshot"
)

func main() {}
`

// TestConsumerModules builds a scratch module that imports every public
// package of the library (through a replace directive to this checkout)
// and checks that its go list -m all holds no plotting, test-only or
// measurement module: those live in the nested modules bench and tests.
// It runs the go command, so -short skips it (the arm64 run under
// emulation); make test runs it in full.
func TestConsumerModules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; the full run checks it")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" && runtime.GOARCH == "amd64" {
			t.Fatalf("go toolchain not on PATH: %v", err)
		}
		t.Skipf("go toolchain not on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.25.0\n\nrequire github.com/lfgrudge/grudge v0.0.0\n\nreplace github.com/lfgrudge/grudge => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(consumerMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "./...")
	all := run("list", "-m", "all")
	for _, line := range strings.Split(strings.TrimSpace(all), "\n") {
		for _, bad := range forbidden {
			if strings.Contains(line, bad) {
				t.Errorf("a consumer's go list -m all holds %q (matches %q)", line, bad)
			}
		}
	}
	t.Logf("go list -m all:\n%s", all)
}
