package matrix

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		in   []float64
		want Stats
	}{
		{"none", nil, Stats{}},
		{"only NaN", []float64{nan}, Stats{}},
		{"one", []float64{4}, Stats{N: 1, Median: 4, Min: 4, Max: 4, Q1: 4, Q3: 4}},
		{"two", []float64{6, 2}, Stats{N: 2, Median: 4, Min: 2, Max: 6, Q1: 3, Q3: 5, RelativeSpread: 1}},
		// The contradiction: 8.63 and 3.18 in one cell.
		{"three", []float64{8.63, 3.18, 8}, Stats{N: 3, Median: 8, Min: 3.18, Max: 8.63, Q1: 5.59, Q3: 8.315, RelativeSpread: (8.63 - 3.18) / 8}},
		{"four", []float64{1, 2, 3, 4}, Stats{N: 4, Median: 2.5, Min: 1, Max: 4, Q1: 1.75, Q3: 3.25, RelativeSpread: 3 / 2.5}},
		{"five, NaN skipped", []float64{5, nan, 1, 3, 2, 4}, Stats{N: 5, Median: 3, Min: 1, Max: 5, Q1: 2, Q3: 4, RelativeSpread: 4.0 / 3}},
		{"zero median", []float64{0, 0, 1}, Stats{N: 3, Max: 1, Q3: 0.5}},
	} {
		in := slices.Clone(tc.in)
		got := Summarize(tc.in)
		if !statsClose(got, tc.want) {
			t.Errorf("%s: Summarize(%v) = %+v; want %+v", tc.name, tc.in, got, tc.want)
		}
		if !slices.EqualFunc(in, tc.in, func(a, b float64) bool { return a == b || a != a && b != b }) {
			t.Errorf("%s: Summarize modified its input", tc.name)
		}
	}
}

func statsClose(a, b Stats) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }
	return a.N == b.N && eq(a.Median, b.Median) && eq(a.Min, b.Min) && eq(a.Max, b.Max) &&
		eq(a.Q1, b.Q1) && eq(a.Q3, b.Q3) && eq(a.RelativeSpread, b.RelativeSpread)
}

func TestFlagged(t *testing.T) {
	for _, tc := range []struct {
		in    []float64
		limit float64
		want  bool
	}{
		{[]float64{10, 10, 10}, 0.25, false},
		{[]float64{9, 10, 11}, 0.25, false},       // spread 0.2
		{[]float64{8.75, 10, 11.25}, 0.25, false}, // exactly 0.25: not above
		{[]float64{8, 10, 11}, 0.25, true},        // 0.3
		{[]float64{8.63, 3.18, 8}, 0.25, true},    // the cell
		{[]float64{1, 100}, 0, true},
		{[]float64{5}, 0, false}, // one repeat says nothing about spread
	} {
		if got := Summarize(tc.in).Flagged(tc.limit); got != tc.want {
			t.Errorf("Summarize(%v).Flagged(%v) = %v; want %v", tc.in, tc.limit, got, tc.want)
		}
	}
}

func TestCombine(t *testing.T) {
	runs := []Result{
		{Impl: ImplLockfree, Procs: 2, Count: 1, Ops: 100, Seconds: 1, Mops: 8.63, P50Ns: 10, P99Ns: 100, P999Ns: 1000, Samples: 3, Mallocs: 1, AdmitRate: 1, Pinned: 2, MemBytes: 5},
		{Impl: ImplLockfree, Procs: 2, Count: 1, Ops: 300, Seconds: 1, Mops: 3.18, P50Ns: 30, P99Ns: 300, P999Ns: 3000, Samples: 3, Mallocs: 2, AdmitRate: 0, Pinned: 1, MemBytes: 7},
		{Impl: ImplLockfree, Procs: 2, Count: 1, Ops: 600, Seconds: 1, Mops: 8, P50Ns: 20, P99Ns: 200, P999Ns: 9000, Samples: 3, Mallocs: 0, AdmitRate: 0.5, Pinned: 2, MemBytes: 6},
	}
	got := combine(runs, 0.25)
	if got.Count != 3 || got.Ops != 1000 || got.Seconds != 3 || got.Samples != 9 || got.Mallocs != 3 ||
		got.Pinned != 1 || got.MemBytes != 7 || got.Impl != ImplLockfree || got.Procs != 2 {
		t.Errorf("sums: %+v", got)
	}
	if got.Mops != 8 || got.MopsMin != 3.18 || got.MopsMax != 8.63 || !got.Noisy || math.Abs(got.Spread-(8.63-3.18)/8) > 1e-12 {
		t.Errorf("throughput summary: %+v", got)
	}
	if got.P50Ns != 20 || got.P99Ns != 200 || got.P999Ns != 3000 {
		t.Errorf("latency medians: %v %v %v", got.P50Ns, got.P99Ns, got.P999Ns)
	}
	if !slices.Equal(got.MopsRuns, []float64{8.63, 3.18, 8}) || !slices.Equal(got.P999Runs, []float64{1000, 3000, 9000}) {
		t.Errorf("runs: %v %v", got.MopsRuns, got.P999Runs)
	}
	if got.AllocsPerOp != 3.0/1000 || got.AdmitRate != (100+0+300)/1000.0 {
		t.Errorf("allocs/op %v, admit rate %v", got.AllocsPerOp, got.AdmitRate)
	}
	// Combining summaries again keeps every repeat.
	again := combine([]Result{got, combine(runs[:1], 0.25)}, 0.25)
	if again.Count != 4 || len(again.MopsRuns) != 4 {
		t.Errorf("combine of combined: count %d, runs %v", again.Count, again.MopsRuns)
	}
}

func TestRatioOfAndFillRatios(t *testing.T) {
	rs := []Result{
		{Clock: ClockDefault, Impl: ImplLockfree, Workload: WorkUpdate, Dist: DistHot1, Procs: 2, Count: 3, Mops: 6, MopsMin: 4, MopsMax: 8},
		{Clock: ClockDefault, Impl: ImplReference, Workload: WorkUpdate, Dist: DistHot1, Procs: 2, Count: 3, Mops: 3, MopsMin: 2, MopsMax: 4, Noisy: true},
		{Clock: ClockDefault, Impl: ImplAtomicAdd, Workload: WorkUpdate, Dist: DistHot1, Procs: 2, Count: 3, Mops: 12, MopsMin: 11, MopsMax: 13},
	}
	fillRatios(rs)
	lf, ref, aa := rs[0], rs[1], rs[2]
	if lf.Ratio != 2 || lf.RatioMin != 1 || lf.RatioMax != 4 || !lf.RatioNoisy {
		t.Errorf("lockfree/reference: %v (%v–%v) noisy %v; want 2 (1–4) noisy", lf.Ratio, lf.RatioMin, lf.RatioMax, lf.RatioNoisy)
	}
	if ref.Ratio != 1 || !ref.RatioNoisy {
		t.Errorf("reference/reference: %v noisy %v", ref.Ratio, ref.RatioNoisy)
	}
	if aa.Ratio != 4 || aa.RatioMin != 11.0/4 || aa.RatioMax != 13.0/2 {
		t.Errorf("atomicadd/reference: %v (%v–%v)", aa.Ratio, aa.RatioMin, aa.RatioMax)
	}
	rr := ratioOf(&aa, &lf)
	if rr.v != 2 || rr.lo != 11.0/8 || rr.hi != 13.0/4 || rr.noisy {
		t.Errorf("atomicadd/lockfree: %+v", rr)
	}
	if rr := ratioOf(&lf, nil); !math.IsNaN(rr.v) {
		t.Errorf("ratio against a missing cell: %+v", rr)
	}
}

// TestFmtRatio checks that a measured ratio of 0 prints as one, not as
// the mark of a missing cell, and that a base that measured nothing (the
// share column's 0 denominator) prints as infinite.
func TestFmtRatio(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{math.NaN(), "–"},
		{0, "0.00x"},
		{0.005, "0.01x"},
		{1.234, "1.23x"},
		{12.4, "12x"},
		{math.Inf(1), "∞"},
	} {
		if got := fmtRatio(tc.v); got != tc.want {
			t.Errorf("fmtRatio(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	zero := Result{Mops: 0, MopsMin: 0, MopsMax: 0, Count: 1}
	base := Result{Mops: 2, Count: 1}
	if got := fmtRatioFlag(ratioOf(&zero, &base)); got != "0.00x" {
		t.Errorf("a cell that measured 0 Mops/s against 2: %q, want 0.00x", got)
	}
}

// TestRoundsInterleave checks the order of the repeats through a fake
// measurement: round r runs every cell once, in cells' order, before
// round r+1 starts, and every cell's repeats come back in round order.
func TestRoundsInterleave(t *testing.T) {
	o := tinyOptions()
	o.Impls = []string{ImplLockfree, ImplReference, ImplRateMap}
	o.Workloads = []string{WorkUpdate, WorkTryUpdateDenied}
	o.Dists = []string{DistHot8}
	o.Clocks = []string{ClockDefault}
	o.Procs = []int{1, 2}
	o.Count = 3
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{o: &o}
	var order []cell
	r.measure = func(c cell) (Result, string, error) {
		order = append(order, c)
		return Result{Procs: c.procs, Pinned: c.procs, Count: 1, Mops: float64(len(order))}, "", nil
	}
	got, err := r.rounds(context.Background(), cs, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var want []cell
	for range o.Count {
		want = append(want, cs...)
	}
	if !slices.Equal(order, want) {
		t.Fatalf("order:\n got %v\nwant %v", order, want)
	}
	if got.n != o.Count*len(cs) || got.full != got.n || got.stopped != "" {
		t.Errorf("rounds: n %d full %d stopped %q", got.n, got.full, got.stopped)
	}
	for i, runs := range got.runs {
		if len(runs) != o.Count {
			t.Fatalf("cell %d: %d repeats", i, len(runs))
		}
		for k, res := range runs {
			if want := float64(k*len(cs) + i + 1); res.Mops != want {
				t.Errorf("cell %d repeat %d: measured as call %v; want %v", i, k, res.Mops, want)
			}
		}
	}

	// Stopping between rounds keeps the repeats measured so far.
	ctx, cancel := context.WithCancel(context.Background())
	order = nil
	r.measure = func(c cell) (Result, string, error) {
		order = append(order, c)
		if len(order) == len(cs)+1 {
			cancel()
		}
		return Result{Procs: c.procs, Count: 1, Mops: 1}, "no", nil
	}
	got, err = r.rounds(ctx, cs, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.n != len(cs)+1 || len(got.runs[0]) != 2 || len(got.runs[1]) != 1 || got.full != 0 || got.why != "no" {
		t.Errorf("stopped rounds: n %d, repeats %d and %d, full %d why %q", got.n, len(got.runs[0]), len(got.runs[1]), got.full, got.why)
	}
	if want := fmt.Sprintf("stopped after %d of %d cell runs (round 2 of 3)", len(cs)+1, 3*len(cs)); !strings.HasPrefix(got.stopped, want) {
		t.Errorf("stopped %q; want prefix %q", got.stopped, want)
	}
}

// TestWarmup: the warm-up runs the first row (every implementation of the
// first cell's clock, workload, dist and P) once, for -warmup instead of
// -duration, before any round, and none of it is recorded; -warmup 0
// runs none.
func TestWarmup(t *testing.T) {
	o := tinyOptions()
	o.Impls = []string{ImplLockfree, ImplReference, ImplAtomicAdd}
	o.Workloads = []string{WorkUpdate, WorkQuery}
	o.Dists = []string{DistUniform}
	o.Clocks = []string{ClockDefault, ClockShared}
	o.Procs = []int{1, 2}
	o.Warmup = 7 * time.Millisecond
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{o: &o}
	var order []cell
	var durs []time.Duration
	r.measure = func(c cell) (Result, string, error) {
		order, durs = append(order, c), append(durs, r.o.Duration)
		return Result{Procs: c.procs, Pinned: c.procs, Count: 1, Mops: 1}, "", nil
	}
	var progress strings.Builder
	if err := r.warmup(context.Background(), cs, &progress); err != nil {
		t.Fatal(err)
	}
	want := cs[:3] // default clock, update, uniform, P=1: the three implementations
	if !slices.Equal(order, want) {
		t.Fatalf("warm-up ran\n %v\nwant\n %v", order, want)
	}
	for _, d := range durs {
		if d != o.Warmup {
			t.Errorf("warm-up cell ran for %v; want -warmup %v", d, o.Warmup)
		}
	}
	if o.Duration != 20*time.Millisecond {
		t.Errorf("-duration is %v after the warm-up; want it restored", o.Duration)
	}
	if n := strings.Count(progress.String(), "[warm-up, not recorded]"); n != 3 {
		t.Errorf("%d warm-up progress lines; want 3:\n%s", n, progress.String())
	}
	o.Warmup, order = 0, nil
	if err := r.warmup(context.Background(), cs, nil); err != nil || len(order) != 0 {
		t.Errorf("-warmup 0 ran %d cells (%v)", len(order), err)
	}
}
