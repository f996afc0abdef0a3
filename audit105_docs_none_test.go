package grudge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
)

// TestAudit105DocumentedNoneComparisonDoesNotCompile (audit 105; fixed at
// stop 61, the text below says what was wrong: the docs now say the
// comparison does not compile, and this test asserts that it does not,
// with the compiler's reason).
//
// Audit 105 (docs against the code). config.go's doc of None: "None
// itself is a function value, so comparing it as a Decay (d ==
// grudge.None, or a Decay used as a map key while it holds None)
// panics"; docs/migrating.md, "Side by side", Decay row: "`None` is a
// function value, so `d == grudge.None` panics: compare with
// `grudge.None()`". The expression the docs name does not panic: it does
// not compile ("invalid operation: d == grudge.None (func can only be
// compared to nil)"), since None's type (noneLaw, a func type) is not
// comparable. grudge v0.1.0 declares `var None` (migrating.md's table),
// so a grudge user's `cfg.Decay == grudge.None` is code that the root
// package promises "compiles by changing the import path alone".
//
// The test builds the docs' expression in a scratch module requiring
// this checkout. It fails today with the compiler's error.
func TestAudit105DocumentedNoneComparisonDoesNotCompile(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command")
	}
	root, _ := filepath.Abs(".")
	dir := t.TempDir()
	gomod := "module a105none\n\ngo 1.25.0\n\nrequire github.com/lfgrudge/grudge v0.0.0\n\nreplace github.com/lfgrudge/grudge => " + root + "\n"
	src := `package a105none

import "github.com/lfgrudge/grudge"

// IsNone is the comparison the docs say panics (at run time).
func IsNone(d grudge.Decay) bool { return d == grudge.None }
`
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err := os.ReadFile("go.sum"); err == nil {
		os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "none.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "func can only be compared to nil") {
		t.Errorf("config.go (None) and docs/migrating.md: `d == grudge.None` does not compile (a func compares only with nil); "+
			"go build: %v\n%s", err, out)
	}
}

// The other half of the same doc sentence holds: a Decay interface
// holding None, compared with another, panics at run time (passing test;
// no test of this promise existed).
func TestAudit105DocsNoneInterfaceComparisonPanics(t *testing.T) {
	var a, b grudge.Decay = grudge.None, grudge.None
	defer func() {
		if recover() == nil {
			t.Errorf("comparing two Decay values holding grudge.None did not panic; config.go: it panics")
		}
	}()
	_ = a == b
	// grudge.None() is comparable, as the doc says.
	if grudge.None() != grudge.None() {
		t.Errorf("grudge.None() != grudge.None()")
	}
}
