package grudge_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// audit56: every ```go block of README.md and docs/*.md that is Go code
// (not pseudocode, not a signature list) compiles against the current
// API, as a function body in a scratch module that requires this
// checkout. The pseudocode blocks of docs/design.md (the CAS loop, the
// tick gate) and docs/snapshots.md's signature list are checked by
// hand / by TestAudit56SnapshotSignatures.

var a56GoBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

func a56Blocks(t *testing.T, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range a56GoBlock.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func TestAudit56DocGoSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a scratch module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, _ := filepath.Abs(".")
	var snippets []string
	for _, f := range []string{"README.md", "docs/capacity.md"} {
		for _, b := range a56Blocks(t, f) {
			snippets = append(snippets, f+"\x00"+b)
		}
	}
	if len(snippets) != 4 {
		t.Fatalf("found %d go blocks in README.md and docs/capacity.md, want 4 (3 + 1)", len(snippets))
	}
	dir := t.TempDir()
	gomod := "module a56snip\n\ngo 1.25.0\n\nrequire github.com/lfgrudge/grudge v0.0.0\n\nreplace github.com/lfgrudge/grudge => " + root + "\n"
	mainGo := `package main

import (
	"errors"
	"expvar"
	"log"
	"net/http"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
)

var (
	_ = errors.New
	_ = expvar.Publish
	_ = log.Fatal
	_ = http.ListenAndServe
	_ = time.Minute
	_ = decay.Linear
	_ = limit.MustNew
	_ = httplimit.Wrap
	_ = rotator.New
	_ = sketch.SipHash
)

var errTooManyRequests = errors.New("429")

func serve() {}

func main() {}
`
	for i, s := range snippets {
		parts := strings.SplitN(s, "\x00", 2)
		body := strings.ReplaceAll(parts[1], "if err != nil { ... }", "if err != nil { return err }")
		fn := "\nfunc snippet" + strconv.Itoa(i+1) + "(clientIP string, mux *http.ServeMux) error {\n" +
			"\t// " + parts[0] + "\n" + body + "\treturn nil\n}\n"
		mainGo += fn
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err := os.ReadFile("go.sum"); err == nil {
		os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainGo), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' Go blocks do not compile: %v\n%s\n--- main.go:\n%s", err, out, mainGo)
	}
}
