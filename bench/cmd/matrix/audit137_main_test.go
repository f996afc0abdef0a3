package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
)

// a137Main runs main with args, its stdout and stderr captured.
func a137Main(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldArgs, oldOut, oldErr := os.Args, os.Stdout, os.Stderr
	os.Args, os.Stdout, os.Stderr = append([]string{"matrix"}, args...), outF, errF
	defer func() { os.Args, os.Stdout, os.Stderr = oldArgs, oldOut, oldErr }()
	main()
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return string(o), string(e)
}

// TestAudit137CommandOutputsAgree: bench/cmd/matrix with tiny cells
// (5 ms, 2 repeats, warm-up 2 ms) prints on stdout exactly the results.md
// it writes (cmd/matrix doc: "prints it as Markdown on stdout ... and
// writes results.csv, results.json, results.md"), one progress line per
// cell per round and one per warm-up cell on stderr (Makefile's bench
// comment), and "wrote" for each file; results.json and results.csv read
// back to the same report; and -from results.json renders the same
// results.md again with no run.
func TestAudit137CommandOutputsAgree(t *testing.T) {
	out := t.TempDir()
	stdout, stderr := a137Main(t, "-impls", "lockfree,reference", "-workloads", "update", "-dists", "hot8",
		"-clock", "default", "-procs", "1,2", "-duration", "5ms", "-warmup", "2ms", "-count", "2",
		"-keys", "64", "-stream", "1024", "-cells", "1024", "-plots=false", "-commit", "audit137", "-out", out)
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr)
	}
	if stdout != string(md) {
		t.Errorf("stdout differs from results.md:\n%s\n---\n%s", stdout, md)
	}
	if n := strings.Count(stderr, "[round "); n != 2*4 {
		t.Errorf("%d progress lines; want 8 (4 cells x 2 rounds):\n%s", n, stderr)
	}
	if n := strings.Count(stderr, "[warm-up, not recorded]"); n != 2 {
		t.Errorf("%d warm-up lines; want 2 (lockfree and reference of the first row):\n%s", n, stderr)
	}
	for _, f := range []string{"results.csv", "results.json", "results.md"} {
		if !strings.Contains(stderr, "wrote "+filepath.Join(out, f)+"\n") {
			t.Errorf("stderr does not say it wrote %s:\n%s", f, stderr)
		}
	}
	jf, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer jf.Close()
	rj, err := matrix.ReadJSON(jf)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	rc, err := matrix.ReadCSV(cf)
	if err != nil {
		t.Fatal(err)
	}
	for name, rep := range map[string]*matrix.Report{"json": rj, "csv": rc} {
		var b bytes.Buffer
		if err := matrix.WriteMarkdown(&b, rep); err != nil {
			t.Fatal(err)
		}
		if b.String() != string(md) {
			t.Errorf("results.%s renders Markdown different from results.md", name)
		}
	}
	if len(rj.Results) != 4 || rj.Meta.Count != 2 || rj.Meta.WarmupMs != 2 || rj.Meta.DurationMs != 5 || rj.Meta.Commit != "audit137" {
		t.Errorf("report: %d results, meta %+v", len(rj.Results), rj.Meta)
	}
	for _, r := range rj.Results {
		if len(r.MopsRuns) != 2 || r.Count != 2 {
			t.Errorf("%s P=%d: %d repeats kept, count %d", r.Impl, r.Procs, len(r.MopsRuns), r.Count)
		}
	}

	out2 := t.TempDir()
	stdout2, stderr2 := a137Main(t, "-from", filepath.Join(out, "results.json"), "-out", out2, "-plots=false")
	md2, err := os.ReadFile(filepath.Join(out2, "results.md"))
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr2)
	}
	if string(md2) != string(md) || stdout2 != string(md) {
		t.Errorf("-from renders a different results.md:\n%s\n---\n%s", md2, md)
	}
	if strings.Contains(stderr2, "[round ") || strings.Contains(stderr2, "warm-up") {
		t.Errorf("-from ran cells:\n%s", stderr2)
	}
}
