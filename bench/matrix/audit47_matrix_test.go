package matrix

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// a47Report builds a synthetic report (no measuring): lockfree, reference
// and atomicadd on the workloads and dists the targets name, both clocks,
// at procs, each cell 3 interleaved repeats. lockfree is 10x reference,
// atomicadd 1.2x lockfree, lockfree's p99.9 a tenth of reference's, so
// every graded target is met (lockfree is 25x reference on the abuse
// path, which wants 20x).
func a47Report(cores int, procs []int) *Report {
	rep := &Report{Meta: Meta{
		CPUModel: "synthetic", Cores: cores, GOARCH: "amd64", GOOS: "linux", GoVersion: "go1.26",
		Commit: "abc", Date: "2026-12-04T00:00:00Z", Command: "matrix", Pinning: "took: synthetic",
		Timer: "fake", TimerPairNs: 10, SampleEvery: 64, SampleCostNs: 30, Config: "synthetic",
		DurationMs: 1, WarmupMs: 1, Count: 3, Spread: 0.25, Procs: procs,
		Impls:     []string{ImplLockfree, ImplReference, ImplAtomicAdd},
		Workloads: []string{WorkUpdate, WorkUpdateAndQuery, WorkTryUpdateAdmit, WorkTryUpdateDenied},
		Dists:     []string{DistUniform, DistHot8, DistHot1}, Clocks: []string{ClockDefault, ClockShared},
	}}
	base := map[string]float64{ImplReference: 1, ImplLockfree: 10, ImplAtomicAdd: 12}
	lat := map[string]float64{ImplReference: 1000, ImplLockfree: 100, ImplAtomicAdd: 50}
	for _, clk := range rep.Meta.Clocks {
		for _, w := range rep.Meta.Workloads {
			for _, d := range rep.Meta.Dists {
				for _, p := range procs {
					for _, im := range rep.Meta.Impls {
						if !runsUnder(im, clk) {
							continue
						}
						var runs []Result
						for k, f := range []float64{1.0, 0.95, 1.05} {
							_ = k
							b := base[im]
							if w == WorkTryUpdateDenied && im == ImplLockfree {
								b = 25 // the abuse target wants >= 20x
							}
							runs = append(runs, Result{Clock: clk, Impl: im, Workload: w, Dist: d, Procs: p, Count: 1,
								Ops: 1000, Seconds: 0.001, Mops: b * f * float64(p), P50Ns: lat[im] / 10,
								P99Ns: lat[im] / 2, P999Ns: lat[im], Samples: 10, Mallocs: 0, MemBytes: 1 << 20,
								MemSource: "sizes", Pinned: p})
						}
						rep.Results = append(rep.Results, combine(runs, rep.Meta.Spread))
					}
				}
			}
		}
	}
	fillRatios(rep.Results)
	return rep
}

// statedP returns the P a target's name states.
func statedP(t *testing.T, name string) int {
	t.Helper()
	i := strings.LastIndex(name, "P=")
	if i < 0 {
		t.Fatalf("target %q names no P", name)
	}
	var p int
	if _, err := fmt.Sscanf(name[i+2:], "%d", &p); err != nil {
		t.Fatalf("target %q: %v", name, err)
	}
	return p
}

// TestAudit47TargetsGradedOnlyWithTheCPUs: on a 2-CPU machine a target
// stated at P=16 is "needs 16 CPUs" even when the run has P=16 cells
// (oversubscribed); P=1 and P=2 targets are graded; on 1 CPU the P=2
// targets need 2 CPUs; on 16 CPUs everything is graded.
func TestAudit47TargetsGradedOnlyWithTheCPUs(t *testing.T) {
	for _, tc := range []struct {
		cores int
		procs []int
	}{
		{2, []int{1, 2}}, {2, []int{1, 2, 4, 16}}, {1, []int{1, 2, 16}}, {16, []int{1, 2, 4, 8, 16}}, {64, []int{1, 2, 16, 64}},
	} {
		rep := a47Report(tc.cores, tc.procs)
		tg := Targets(rep)
		if len(tg) == 0 {
			t.Fatalf("cores %d: no targets", tc.cores)
		}
		var md bytes.Buffer
		if err := WriteMarkdown(&md, rep); err != nil {
			t.Fatal(err)
		}
		for _, x := range tg {
			if strings.HasPrefix(x.Target, "zero allocs") {
				if x.Met != "yes" {
					t.Errorf("cores %d: %q met %q; want yes (0 mallocs)", tc.cores, x.Target, x.Met)
				}
				continue
			}
			p := statedP(t, x.Target)
			want := "yes"
			if tc.cores < p {
				want = fmt.Sprintf("needs %d CPUs", p)
			}
			if x.Met != want {
				t.Errorf("cores %d procs %v: %q met %q (measured %q); want %q", tc.cores, tc.procs, x.Target, x.Met, x.Measured, want)
			}
			if tc.cores < p {
				// Measured is informational, from a P the machine has.
				var mp int
				if i := strings.Index(x.Measured, "at P="); i >= 0 {
					fmt.Sscanf(x.Measured[i+5:], "%d", &mp)
					if mp > tc.cores {
						t.Errorf("cores %d: ungraded %q measured at P=%d, above the CPUs", tc.cores, x.Target, mp)
					}
				}
			}
			row := "| " + x.Target + " | " + x.Measured + " | " + x.Met + " |"
			if !strings.Contains(md.String(), row) {
				t.Errorf("cores %d: Markdown lacks the target row %q", tc.cores, row)
			}
		}
	}
}

// TestAudit47FixedUngradedTargetShowsLargestPRun: TargetCheck.Met's doc
// (report.go) said that where a target needs more CPUs "Measured then
// shows the largest P run", and docs/benchmarks.md "the largest P this
// machine ran"; a 2-CPU run with -procs 1,2,4 ran P=4, but Measured shows
// P=2, the largest P that fits the CPUs (a sensible choice). Fixed in the
// docs, which now say so; this pins it.
func TestAudit47FixedUngradedTargetShowsLargestPRun(t *testing.T) {
	rep := a47Report(2, []int{1, 2, 4})
	for _, x := range Targets(rep) {
		if x.Target != "uniform Update >= 3x reference at P=16" {
			continue
		}
		if x.Met != "needs 16 CPUs" {
			t.Fatalf("met %q", x.Met)
		}
		if !strings.Contains(x.Measured, "at P=2") {
			t.Errorf("measured %q; want the largest P run that fits the machine's 2 CPUs (P=2), as TargetCheck.Met's doc says", x.Measured)
		}
		return
	}
	t.Fatal("target not found")
}

// TestAudit47FixedOversubscribedProcsNotFlagged (fixed: results.md has an "oversubscribed" line): a run with GOMAXPROCS
// values above the machine's CPUs (-procs 1,2,4 on 2 CPUs) should say so
// in results.md (issue 29, per the brief: "GOMAXPROCS values above the
// CPU count flagged"); the report marks nothing: the P=4 rows read like
// any other and no line mentions the oversubscription.
func TestAudit47FixedOversubscribedProcsNotFlagged(t *testing.T) {
	rep := a47Report(2, []int{1, 2, 4})
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	s := strings.ToLower(md.String())
	for _, w := range []string{"oversubscri", "more workers than", "above the cpu", "exceeds the cpu", "more than 2 cpus", "> 2 cpus", "p > cpus"} {
		if strings.Contains(s, w) {
			return
		}
	}
	var rows []string
	for _, l := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(l, "| update | uniform | 4 |") {
			rows = append(rows, l)
		}
	}
	t.Errorf("results.md of a 2-CPU run with P=4 cells flags no oversubscription (meta cores=%d, procs %v); P=4 rows:\n%s",
		rep.Meta.Cores, rep.Meta.Procs, strings.Join(rows, "\n"))
}

// TestAudit47RatiosFromMediansOfInterleavedRepeats: Ratio is the
// median over the base's median on the same clock, with RatioMin =
// MopsMin/base MopsMax, RatioMax = MopsMax/base MopsMin, and the noisy
// flag when either side's spread exceeds -spread; the Markdown prints the
// median (min–max) and the flagged ratio.
func TestAudit47RatiosFromMediansOfInterleavedRepeats(t *testing.T) {
	mk := func(clk, im string, mops ...float64) Result {
		var runs []Result
		for _, m := range mops {
			runs = append(runs, Result{Clock: clk, Impl: im, Workload: WorkUpdate, Dist: DistHot8, Procs: 1, Count: 1, Ops: 10, Seconds: 1, Mops: m, Pinned: 1})
		}
		return combine(runs, 0.25)
	}
	rs := []Result{
		mk(ClockDefault, ImplLockfree, 10, 30, 20), // median 20, spread 1: noisy
		mk(ClockDefault, ImplReference, 5, 4, 6),   // median 5, spread 0.4: noisy
		mk(ClockShared, ImplLockfree, 9, 9.1, 8.9), // median 9, quiet
		mk(ClockShared, ImplReference, 3, 3, 3),    // median 3, quiet
	}
	fillRatios(rs)
	lf, sh := rs[0], rs[2]
	if !slices.Equal(lf.MopsRuns, []float64{10, 30, 20}) {
		t.Errorf("MopsRuns %v; want round order 10,30,20", lf.MopsRuns)
	}
	if lf.Mops != 20 || lf.MopsMin != 10 || lf.MopsMax != 30 || lf.MopsQ1 != 15 || lf.MopsQ3 != 25 || lf.Spread != 1 || !lf.Noisy {
		t.Errorf("lockfree summary %+v", lf)
	}
	if lf.Ratio != 4 || math.Abs(lf.RatioMin-10.0/6) > 1e-12 || lf.RatioMax != 7.5 || !lf.RatioNoisy {
		t.Errorf("default ratio %v (%v–%v) noisy %v; want 4 (1.667–7.5) noisy", lf.Ratio, lf.RatioMin, lf.RatioMax, lf.RatioNoisy)
	}
	if sh.Ratio != 3 || sh.RatioNoisy || math.Abs(sh.RatioMin-8.9/3) > 1e-12 || math.Abs(sh.RatioMax-9.1/3) > 1e-12 {
		t.Errorf("shared ratio %v (%v–%v) noisy %v; want 3 from the shared clock's reference, quiet", sh.Ratio, sh.RatioMin, sh.RatioMax, sh.RatioNoisy)
	}
	if rs[1].Ratio != 1 || rs[1].Base != ImplReference {
		t.Errorf("reference ratio %v base %q", rs[1].Ratio, rs[1].Base)
	}
	rep := &Report{Meta: Meta{Count: 3, Spread: 0.25, SampleEvery: 64, Cores: 2}, Results: rs}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| update | hot8 | 1 | 20.0 (10.0–30.0) ⚠ | 5.00 (4.00–6.00) ⚠ | 4.00x ⚠ |",
		"| update | hot8 | 1 | 9.00 (8.90–9.10) | 3.00 (3.00–3.00) | 3.00x |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// TestAudit47WarmupBeforeFirstCellNotRecorded: through fake
// measurements, the warm-up runs every implementation of the first row
// before any measured repeat, for -warmup, and none of its runs is among
// the rounds' repeats.
func TestAudit47WarmupBeforeFirstCellNotRecorded(t *testing.T) {
	o := tinyOptions()
	o.Impls = []string{ImplLockfree, ImplReference, ImplAtomicAdd, ImplRateMap}
	o.Workloads = []string{WorkUpdate, WorkTryUpdateDenied}
	o.Dists = []string{DistHot1, DistHot8}
	o.Clocks = []string{ClockDefault, ClockShared}
	o.Procs = []int{2, 4}
	o.Count = 2
	o.Warmup = 3 * time.Millisecond
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{o: &o}
	type call struct {
		c   cell
		dur time.Duration
	}
	var log []call
	r.measure = func(c cell) (Result, string, error) {
		log = append(log, call{c, r.o.Duration})
		return Result{Procs: c.procs, Pinned: c.procs, Count: 1, Mops: float64(len(log))}, "", nil
	}
	var progress strings.Builder
	if err := r.warmup(context.Background(), cs, &progress); err != nil {
		t.Fatal(err)
	}
	nw := len(log)
	// Every implementation of the first row, ratemap included, which
	// cells() puts after the clock pass (audit 101: the warm-up stopped
	// at the first cell of another row and skipped it).
	var row []cell
	for _, c := range cs {
		if c.clock == cs[0].clock && c.work.name == cs[0].work.name && c.dist == cs[0].dist && c.procs == cs[0].procs {
			row = append(row, c)
		}
	}
	if nw != 4 || len(row) != 4 {
		t.Fatalf("warm-up ran %d cells (the first row has %d); want 4 (lockfree, reference, atomicadd and ratemap of the first row)", nw, len(row))
	}
	for i, l := range log {
		if l.c != row[i] || l.dur != o.Warmup || l.c.procs != 2 {
			t.Errorf("warm-up call %d: %+v for %v; want %+v for %v", i, l.c, l.dur, row[i], o.Warmup)
		}
	}
	rr, err := r.rounds(context.Background(), cs, &progress, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != nw+o.Count*len(cs) {
		t.Fatalf("%d calls; want %d warm-up + %d measured", len(log), nw, o.Count*len(cs))
	}
	if log[nw].c != cs[0] || log[nw].dur != o.Duration {
		t.Errorf("first measured call %+v for %v; want the first cell for -duration", log[nw].c, log[nw].dur)
	}
	for i, runs := range rr.runs {
		if len(runs) != o.Count {
			t.Errorf("cell %d: %d repeats; want %d (warm-up not recorded)", i, len(runs), o.Count)
		}
		for _, x := range runs {
			if x.Mops <= float64(nw) {
				t.Errorf("cell %d holds warm-up call %v", i, x.Mops)
			}
		}
	}
	p := progress.String()
	iw, ir := strings.LastIndex(p, "[warm-up, not recorded]"), strings.Index(p, "[round 1/")
	if iw < 0 || ir < 0 || iw > ir {
		t.Errorf("progress: warm-up lines must come before round 1's:\n%s", p)
	}
}

// TestAudit47TinyRunFilesConsistent: a real run of a tiny matrix (ms
// cells) written as files: results.md is the Markdown of results.json
// and of results.csv, has the warm-up and pinning lines, one row per
// (workload, dist, P), and the warm-up is not a cell; the progress shows
// the warm-up before round 1; pinning is read back per cell.
func TestAudit47TinyRunFilesConsistent(t *testing.T) {
	o := tinyOptions()
	o.Impls = []string{ImplLockfree, ImplReference}
	o.Workloads = []string{WorkUpdate}
	o.Dists = []string{DistHot8}
	o.Clocks = []string{ClockDefault}
	o.Procs = []int{1, 2}
	o.Count = 2
	o.Duration, o.Warmup = 3*time.Millisecond, 2*time.Millisecond
	o.Quiet = false
	var progress bytes.Buffer
	rep, err := Run(context.Background(), o, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 {
		t.Fatalf("%d results; want 4 (the warm-up is not a cell)", len(rep.Results))
	}
	p := progress.String()
	if n := strings.Count(p, "[warm-up, not recorded]"); n != 2 {
		t.Errorf("%d warm-up lines; want 2", n)
	}
	if iw, ir := strings.LastIndex(p, "[warm-up"), strings.Index(p, "[round 1/"); iw < 0 || ir < iw {
		t.Errorf("warm-up not before round 1:\n%s", p)
	}
	for _, r := range rep.Results {
		if r.Count != 2 || len(r.MopsRuns) != 2 || r.Pinned > r.Procs || r.Pinned < 0 {
			t.Errorf("%s P=%d: count %d runs %v pinned %d", r.Impl, r.Procs, r.Count, r.MopsRuns, r.Pinned)
		}
		if strings.HasPrefix(rep.Meta.Pinning, "took") && r.Pinned != r.Procs {
			t.Errorf("pinning %q but %s P=%d pinned %d", rep.Meta.Pinning, r.Impl, r.Procs, r.Pinned)
		}
	}
	if !(strings.HasPrefix(rep.Meta.Pinning, "took") || strings.HasPrefix(rep.Meta.Pinning, "unpinned") || strings.HasPrefix(rep.Meta.Pinning, "partial")) {
		t.Errorf("pinning %q", rep.Meta.Pinning)
	}
	dir := t.TempDir()
	if _, err := WriteFiles(rep, dir, false); err != nil {
		t.Fatal(err)
	}
	a47CheckFiles(t, dir)
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	for _, want := range []string{"- pinning: " + rep.Meta.Pinning + "\n", "- warm-up: before round 1, each implementation of the first row ran 2ms, not recorded", "| update | hot8 | 1 |", "| update | hot8 | 2 |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("results.md lacks %q", want)
		}
	}
}

// a47CheckFiles checks that results.md is what WriteMarkdown makes of
// results.json and of results.csv.
func a47CheckFiles(t *testing.T, dir string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		read func(io.Reader) (*Report, error)
	}{{"results.json", ReadJSON}, {"results.csv", ReadCSV}} {
		fh, err := os.Open(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := f.read(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteMarkdown(&b, rep); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), md) {
			t.Errorf("results.md differs from the Markdown of %s:\n--- md\n%s\n--- from %s\n%s", f.name, md, f.name, b.Bytes())
		}
	}
}

// TestAudit47SyntheticFilesConsistent: the synthetic 2-CPU report with
// P=16 cells, written as files: results.md, results.json and results.csv
// agree, and results.md grades the P=16 targets "needs 16 CPUs".
func TestAudit47SyntheticFilesConsistent(t *testing.T) {
	rep := a47Report(2, []int{1, 2, 16})
	dir := t.TempDir()
	if _, err := WriteFiles(rep, dir, false); err != nil {
		t.Fatal(err)
	}
	a47CheckFiles(t, dir)
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if n := bytes.Count(md, []byte("| needs 16 CPUs |")); n != 7 {
		t.Errorf("%d targets graded \"needs 16 CPUs\"; want 7 (5 ratios, 2 latency)", n)
	}
	for _, l := range strings.Split(string(md), "\n") {
		if strings.Contains(l, "at P=16") && (strings.HasSuffix(l, "| yes |") || strings.HasSuffix(l, "| no |")) {
			t.Errorf("P=16 target graded on 2 CPUs: %s", l)
		}
	}
}

// TestAudit47ParseFlagsErrors: bad flags give an error naming the flag
// and the value.
func TestAudit47ParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-duration", "0"}, "duration must be > 0"},
		{[]string{"-duration", "-1s"}, "duration must be > 0"},
		{[]string{"-duration", "abc"}, "invalid value \"abc\" for flag -duration"},
		{[]string{"-warmup", "-1ms"}, "warmup must be >= 0"},
		{[]string{"-count", "0"}, "count must be >= 1"},
		{[]string{"-spread", "-0.1"}, "spread must be >= 0"},
		{[]string{"-spread", "NaN"}, "spread must be >= 0"},
		{[]string{"-procs", "0"}, "-procs: \"0\" is not a positive integer"},
		{[]string{"-procs", "2,x"}, "-procs: \"x\" is not a positive integer"},
		{[]string{"-procs", ","}, "-procs: empty list"},
		{[]string{"-impls", "lockfree,bogus"}, "-impls: unknown name \"bogus\""},
		{[]string{"-impls", ""}, "-impls: empty list"},
		{[]string{"-workloads", "updat"}, "-workloads: unknown name \"updat\""},
		{[]string{"-dists", "hot2"}, "-dists: unknown name \"hot2\""},
		{[]string{"-clock", "wall"}, "-clock: unknown name \"wall\""},
		{[]string{"-sample", "3"}, "sample must be a power of two"},
		{[]string{"-stream", "1000"}, "stream must be a power of two"},
		{[]string{"-keys", "7"}, "keys must be in [8, 2^31]"},
		{[]string{"-levels", "9"}, "levels must be in [1, 8]"},
		{[]string{"-levels", "0"}, "levels must be in [1, 8]"},
		{[]string{"-cells", "0"}, "cells must be >= 1"},
		{[]string{"-backoff", "5/2"}, "backoff must be off or F/L"},
		{[]string{"-backoff", "on"}, "backoff must be off or F/L"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nosuch"}, "flag provided but not defined: -nosuch"},
	} {
		_, err := ParseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%q): %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := ParseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v; want flag.ErrHelp", err)
	}
	o, err := ParseFlags([]string{"-procs", "4,1,2,2", "-impls", "reference,lockfree", "-clock", "both", "-duration", "1ms", "-warmup", "0"}, io.Discard)
	if err != nil || !slices.Equal(o.Procs, []int{1, 2, 4}) || !slices.Equal(o.Impls, []string{ImplLockfree, ImplReference}) ||
		!slices.Equal(o.Clocks, AllClocks) || o.Warmup != 0 {
		t.Errorf("good flags: %+v, %v", o, err)
	}
}

// TestAudit47FixedLevelsCellsTruncated (fixed: range-checked before the conversion): -levels and -cells are parsed
// as uint (64-bit) and stored as uint32 without a range check, so
// -levels 4294967297 (2^32+1) is accepted as L=1 and -cells 4294967297 as
// M=1, where Validate promises "levels must be in [1, 8]" (options.go)
// and a bad flag should be an error.
func TestAudit47FixedLevelsCellsTruncated(t *testing.T) {
	for _, args := range [][]string{{"-levels", "4294967297"}, {"-levels", "4294967300"}, {"-cells", "4294967297"}} {
		o, err := ParseFlags(args, io.Discard)
		if err == nil {
			t.Errorf("ParseFlags(%q) accepted it as levels=%d cells=%d; want an out-of-range error (options.go Validate: \"levels must be in [1, 8]\", \"cells must be >= 1\"; the truncation to uint32 at options.go ParseFlags hides the real value)", args, o.Levels, o.Cells)
		}
	}
}
