package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
)

// a101Write writes <name> as a results.json of one matrix run whose
// cells are (update, hot8, P) with the given Mops/s, P = 2, 8, 16 in
// order; a NaN-free, repeat-free report as bench/backoff16.sh's sweep
// writes one (-count 1).
func a101Write(t *testing.T, dir, name string, mops ...float64) {
	t.Helper()
	var rep matrix.Report
	rep.Meta.Commit = "abc1234"
	rep.Meta.Cores = 16
	for i, m := range mops {
		rep.Results = append(rep.Results, matrix.Result{Clock: "default", Impl: "lockfree", Workload: "update", Dist: "hot8",
			Procs: []int{2, 8, 16}[i], Count: 1, Mops: m, MopsMin: m, MopsMax: m})
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// a101Row returns the table row of (update, hot8, P=procs).
func a101Row(out, procs string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| update | hot8 | "+procs+" |") {
			return l
		}
	}
	return ""
}

// TestAudit101BenchFixedBackoffsumRatioOverDifferentRounds (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (bench/cmd/backoffsum/main.go, package comment): "medians over
// the rounds with their range, against the reference measured in the
// same rounds", and the printed legend: "x: over the reference's median
// of the same rounds". bench/backoff16.sh runs every sweep under
// `timeout -k 5 30`; a run stopped by SIGTERM still writes its
// results.json, with the cells it measured (Meta.Stopped), so a
// schedule's round may lack a cell the reference has.
//
// Code: run() drops the round number of the file name (`_, sched, ok :=
// strings.Cut(base, "-")`) and divides the median of whatever rounds the
// schedule has by the median of ALL the reference's rounds.
//
// Repro: reference P=16 in rounds 1, 2, 3 = 1, 10, 10 Mops/s; schedule
// "off" has P=16 only in rounds 1 and 2 (round 3 was stopped before it)
// = 2, 11. Over the same rounds (1, 2) the ratio is median(2, 11) /
// median(1, 10) = 6.5 / 5.5 = 1.18x; backoffsum prints 6.5 / 10 = 0.65x
// (a slowdown where the same rounds show a gain).
func TestAudit101BenchFixedBackoffsumRatioOverDifferentRounds(t *testing.T) {
	dir := t.TempDir()
	a101Write(t, dir, "1-reference.json", 5, 5, 1)
	a101Write(t, dir, "2-reference.json", 5, 5, 10)
	a101Write(t, dir, "3-reference.json", 5, 5, 10)
	a101Write(t, dir, "1-off.json", 5, 5, 2)
	a101Write(t, dir, "2-off.json", 5, 5, 11)
	a101Write(t, dir, "3-off.json", 5, 5) // stopped before its P=16 cell
	var out strings.Builder
	if err := run(dir, &out); err != nil {
		t.Fatal(err)
	}
	row := a101Row(out.String(), "16")
	if row == "" {
		t.Fatalf("no P=16 row:\n%s", out.String())
	}
	if !strings.Contains(row, "1.18x") {
		t.Errorf("P=16 row %q: the schedule's median over the reference's median of the same rounds (1 and 2) is 6.5/5.5 = 1.18x; "+
			"backoffsum divides by the reference's median over rounds the schedule did not run\n%s", row, out.String())
	}
}

// TestAudit101BenchFixedBackoffsumRoundsLabelFromFirstKey (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (the legend backoffsum prints): "median (min-max) of %d rounds".
// Code: the count is len(ref[keys[0]]), the reference's rounds of the
// first row of the sorted table only. Rows sort by workload name, so
// "tryupdate-admitted" comes first, while bench/backoff16.sh runs it
// last (-workloads update,tryupdate-admitted): a reference run stopped by
// its `timeout` lacks exactly the first row's cells. Repro: three
// reference rounds, rounds 2 and 3 stopped after their update cells; the
// legend says "of 1 rounds" over a table whose update rows and schedule
// columns are medians of 3.
func TestAudit101BenchFixedBackoffsumRoundsLabelFromFirstKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, works ...string) {
		var rep matrix.Report
		for _, w := range works {
			rep.Results = append(rep.Results, matrix.Result{Workload: w, Dist: "hot8", Procs: 16, Count: 1, Mops: 1})
		}
		b, _ := json.Marshal(rep)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1-reference.json", "update", "tryupdate-admitted")
	write("2-reference.json", "update") // stopped before tryupdate-admitted
	write("3-reference.json", "update") // likewise
	for _, r := range []string{"1", "2", "3"} {
		write(r+"-off.json", "update", "tryupdate-admitted")
	}
	var out strings.Builder
	if err := run(dir, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "of 3 rounds") {
		t.Errorf("the sweep has 3 rounds (every schedule cell and the update reference are medians of 3), but the legend "+
			"counts the first sorted row's reference rounds:\n%s", out.String())
	}
}

// TestAudit101BenchFixedBackoffsumEmptyReferencePanics (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (main.go): run returns an error for a folder it cannot summarise
// ("no .json files", "no <round>-reference.json"); main prints
// "backoffsum: <err>" and exits 1. Code: when the reference files hold
// no cells (every reference sweep was stopped before its first cell, or
// failed: results.json with "results": null), ref is non-nil but empty,
// keys is empty, and `len(ref[keys[0]])` panics with an index out of
// range instead of returning an error.
func TestAudit101BenchFixedBackoffsumEmptyReferencePanics(t *testing.T) {
	dir := t.TempDir()
	a101Write(t, dir, "1-reference.json") // no cells
	a101Write(t, dir, "1-off.json", 2, 2, 2)
	var out strings.Builder
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("run panicked on reference files without cells: %v (want an error)", p)
			}
		}()
		err = run(dir, &out)
	}()
	if err == nil && !t.Failed() {
		t.Errorf("run summarised a sweep whose reference has no cells without an error:\n%s", out.String())
	}
}

// TestAudit101BenchBackoffsumEvenMedian (passes): with an even number of
// rounds the median is the mean of the middle two, and the ratio is of
// the medians, as the legend says.
func TestAudit101BenchBackoffsumEvenMedian(t *testing.T) {
	if m, lo, hi := stats([]float64{4, 1, 3, 2}); m != 2.5 || lo != 1 || hi != 4 {
		t.Errorf("stats(4,1,3,2) = %v %v %v; want 2.5 1 4", m, lo, hi)
	}
	if m, _, _ := stats([]float64{7}); m != 7 {
		t.Errorf("stats(7) median %v", m)
	}
	dir := t.TempDir()
	a101Write(t, dir, "1-reference.json", 1, 1, 2)
	a101Write(t, dir, "2-reference.json", 1, 1, 4)
	a101Write(t, dir, "1-16-512.json", 1, 1, 3)
	a101Write(t, dir, "2-16-512.json", 1, 1, 9)
	var out strings.Builder
	if err := run(dir, &out); err != nil {
		t.Fatal(err)
	}
	// reference median 3, schedule median 6: 2.00x.
	if row := a101Row(out.String(), "16"); !strings.Contains(row, "| 3.00 (2.00–4.00) | 6.00 (3.00–9.00) 2.00x |") {
		t.Errorf("P=16 row %q\n%s", row, out.String())
	}
	if !strings.Contains(out.String(), "| reference | 16/512 |") {
		t.Errorf("schedule 16-512 not shown as 16/512:\n%s", out.String())
	}
}
