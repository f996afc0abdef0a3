package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
)

// TestRun: rounds of the reference and of two schedules (written as
// bench/backoff16.sh names them) summarise to medians with their range,
// schedules in order (off first), and ratios of the medians.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mops ...float64) {
		var rep matrix.Report
		rep.Meta.Commit = "abc1234"
		for i, m := range mops {
			rep.Results = append(rep.Results, matrix.Result{Workload: "update", Dist: []string{"hot1", "hot8"}[i], Procs: 16, Mops: m})
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1-reference.json", 2, 10)
	write("2-reference.json", 4, 10)
	write("3-reference.json", 3, 10)
	write("1-32-1024.json", 6, 5)
	write("2-32-1024.json", 9, 5)
	write("3-32-1024.json", 3, 5)
	write("1-off.json", 3, 20)
	write("2-off.json", 3, 20)
	write("3-off.json", 3, 20)
	var out strings.Builder
	if err := run(dir, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"| reference | off | 32/1024 |",
		"| update | hot1 | 16 | 3.00 (2.00–4.00) | 3.00 (3.00–3.00) 1.00x | 6.00 (3.00–9.00) 2.00x |",
		"| update | hot8 | 16 | 10.00 (10.00–10.00) | 20.00 (20.00–20.00) 2.00x | 5.00 (5.00–5.00) 0.50x |",
		"median (min-max) of 3 rounds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if err := run(t.TempDir(), &out); err == nil {
		t.Error("an empty folder summarised without an error")
	}
}
