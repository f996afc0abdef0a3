package matrix

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// a92Cell is one cell of repeats (round order) of impl on update/uniform
// at P=1 under clk, combined as Run combines them.
func a92Cell(clk, impl string, mops ...float64) Result {
	var runs []Result
	for _, m := range mops {
		runs = append(runs, Result{Clock: clk, Impl: impl, Workload: WorkUpdate, Dist: DistUniform, Procs: 1, Count: 1,
			Ops: 1000, Seconds: 0.25, Mops: m, P50Ns: 10 * m, P99Ns: 20 * m, P999Ns: 30 * m, Samples: 10, Pinned: 1, MemSource: "sizes"})
	}
	return combine(runs, DefaultSpread)
}

// TestAudit92BenchMedianSpreadOddEvenOutliers: the median and quartiles
// are type 7 (an even count's median is the mean of the middle two), an
// outlier moves the max and the spread but not the median, the repeats
// stay in round order, and ratios use the medians (doc.go "Repeats").
func TestAudit92BenchMedianSpreadOddEvenOutliers(t *testing.T) {
	for _, tc := range []struct {
		in                  []float64
		med, q1, q3, lo, hi float64
	}{
		{[]float64{3, 1, 2}, 2, 1.5, 2.5, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1.75, 3.25, 1, 4},
		{[]float64{6, 5, 4, 3, 2, 1}, 3.5, 2.25, 4.75, 1, 6},
		{[]float64{10, 10, 1000, 10}, 10, 10, 257.5, 10, 1000},
		{[]float64{8, 12}, 10, 9, 11, 8, 12},
	} {
		s := Summarize(tc.in)
		if s.N != len(tc.in) || s.Median != tc.med || s.Q1 != tc.q1 || s.Q3 != tc.q3 || s.Min != tc.lo || s.Max != tc.hi {
			t.Errorf("Summarize(%v) = %+v; want median %v, Q1 %v, Q3 %v, min %v, max %v", tc.in, s, tc.med, tc.q1, tc.q3, tc.lo, tc.hi)
		}
		if want := (tc.hi - tc.lo) / tc.med; s.RelativeSpread != want {
			t.Errorf("Summarize(%v).RelativeSpread = %v; want %v", tc.in, s.RelativeSpread, want)
		}
	}

	// An outlier repeat (a neighbour's burst) flags the cell but leaves
	// the median, and so the ratio, where the other repeats are.
	lf := a92Cell(ClockDefault, ImplLockfree, 10, 1000, 11)
	ref := a92Cell(ClockDefault, ImplReference, 5, 5.5, 5)
	rs := []Result{lf, ref}
	fillRatios(rs)
	lf = rs[0]
	if lf.Mops != 11 || lf.MopsMin != 10 || lf.MopsMax != 1000 || !lf.Noisy || !slices.Equal(lf.MopsRuns, []float64{10, 1000, 11}) {
		t.Errorf("outlier cell: %+v", lf)
	}
	if lf.P999Ns != 330 || !slices.Equal(lf.P999Runs, []float64{300, 30000, 330}) {
		t.Errorf("p99.9 median %v runs %v; want 330, [300 30000 330]", lf.P999Ns, lf.P999Runs)
	}
	if lf.Ratio != 2.2 || !lf.RatioNoisy || lf.RatioMin != 10/5.5 || lf.RatioMax != 1000.0/5 {
		t.Errorf("ratio %v (%v–%v) noisy %v; want 2.2 (10/5.5–200) noisy", lf.Ratio, lf.RatioMin, lf.RatioMax, lf.RatioNoisy)
	}

	// Two repeats: the median is their mean, the latency too.
	two := a92Cell(ClockDefault, ImplLockfree, 8, 12)
	if two.Count != 2 || two.Mops != 10 || two.Spread != 0.4 || !two.Noisy || two.P50Ns != 100 {
		t.Errorf("two repeats: count %d mops %v spread %v noisy %v p50 %v; want 2, 10, 0.4, noisy, 100", two.Count, two.Mops, two.Spread, two.Noisy, two.P50Ns)
	}
	// One repeat is never noisy, whatever -spread.
	if one := combine([]Result{{Mops: 3, Count: 1}}, 0); one.Noisy || one.Spread != 0 {
		t.Errorf("one repeat: noisy %v spread %v", one.Noisy, one.Spread)
	}
}

// TestAudit92BenchRatioDirectionMatchesLabels: every ratio the report
// prints is the labelled numerator over the labelled denominator, on one
// clock: lockfree/reference, rotator/refrotator, atomicadd/lockfree, the
// clock share (default over shared), the targets (including the
// "atomicadd/lockfree <= 2" ones), and Result.Ratio against Base. A
// target exactly at its threshold is met.
func TestAudit92BenchRatioDirectionMatchesLabels(t *testing.T) {
	mops := map[string]map[string]float64{
		ClockDefault: {ImplLockfree: 8, ImplReference: 2, ImplRotator: 6, ImplRefRotator: 3, ImplAtomicAdd: 16},
		ClockShared:  {ImplLockfree: 4, ImplReference: 2, ImplRotator: 3, ImplRefRotator: 3},
	}
	var rs []Result
	for _, clk := range AllClocks {
		for _, d := range []string{DistUniform, DistHot1} {
			for _, im := range AllImpls[:5] {
				if !runsUnder(im, clk) {
					continue
				}
				r := a92Cell(clk, im, mops[clk][im], mops[clk][im], mops[clk][im])
				r.Dist = d
				rs = append(rs, r)
			}
		}
	}
	fillRatios(rs)
	for _, r := range rs {
		want := map[string]float64{ImplLockfree: 4, ImplReference: 1, ImplRotator: 2, ImplRefRotator: 1.5, ImplAtomicAdd: 8}[r.Impl]
		if r.Clock == ClockShared {
			want = map[string]float64{ImplLockfree: 2, ImplReference: 1, ImplRotator: 1, ImplRefRotator: 1.5}[r.Impl]
		}
		if r.Ratio != want {
			t.Errorf("%s %s %s: Ratio %v against %s; want %v", r.Clock, r.Dist, r.Impl, r.Ratio, r.Base, want)
		}
	}
	rep := &Report{Meta: Meta{Cores: 2, Count: 3, Spread: DefaultSpread, SampleEvery: 64}, Results: rs}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| workload | keys | P | lockfree | reference | rotator | refrotator | atomicadd | lockfree/reference | rotator/refrotator | atomicadd/lockfree |",
		"| update | uniform | 1 | 8.00 (8.00–8.00) | 2.00 (2.00–2.00) | 6.00 (6.00–6.00) | 3.00 (3.00–3.00) | 16.0 (16.0–16.0) | 4.00x | 2.00x | 2.00x |",
		"| workload | keys | P | lockfree | reference | rotator | refrotator | lockfree/reference | rotator/refrotator |",
		"| update | uniform | 1 | 4.00 (4.00–4.00) | 2.00 (2.00–2.00) | 3.00 (3.00–3.00) | 3.00 (3.00–3.00) | 2.00x | 1.00x |",
		// lockfree default, shared; reference default, shared; lf/ref default, shared; clock share; rotator/refrotator default, shared
		"| update | uniform | 1 | 8.00 | 4.00 | 2.00 | 2.00 | 4.00x | 2.00x | 2.00x | 2.00x | 1.00x |",
		"| uniform Update >= 4x reference at P=1 | 4.00x at P=1 (4.00–4.00x) | yes |",
		"| hot1 serial Update within 2x of atomic-add (atomicadd/lockfree <= 2 at P=1) | 2.00x at P=1 (2.00–2.00x) | yes |",
		"| uniform Update >= 3x reference at P=1, shared clock | 2.00x at P=1 (2.00–2.00x) | no |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// TestAudit92BenchFixedZeroRepeatHiddenFromRatioBounds (audit 92; fixed at stop 58, the text below says what was wrong): doc.go
// ("Repeats") defines RatioMin = MopsMin/base MopsMax, and the targets
// show "the min over the other's max" (report.go, Targets). A repeat
// that measured 0 Mops/s is a real minimum, but ratioOf's orOne reads a
// MopsMin of 0 as "no bounds" and puts the median in its place: with
// lockfree repeats 0, 10, 10 against reference 5, 5, 5 the throughput
// table prints "10.0 (0.00–10.0)" while RatioMin is 2 and the target
// reads "2.00x at P=1 (2.00–2.00x)", a range the repeats do not support.
func TestAudit92BenchFixedZeroRepeatHiddenFromRatioBounds(t *testing.T) {
	rs := []Result{a92Cell(ClockDefault, ImplLockfree, 0, 10, 10), a92Cell(ClockDefault, ImplReference, 5, 5, 5)}
	fillRatios(rs)
	lf := rs[0]
	if lf.MopsMin != 0 || lf.Mops != 10 {
		t.Fatalf("cell summary: min %v median %v", lf.MopsMin, lf.Mops)
	}
	if lf.RatioMin != 0 {
		t.Errorf("RatioMin = %v; want MopsMin/base MopsMax = 0/5 = 0 (doc.go, Repeats)", lf.RatioMin)
	}
	rep := &Report{Meta: Meta{Cores: 2, Count: 3, Spread: DefaultSpread}, Results: rs}
	for _, x := range Targets(rep) {
		if x.Target == "uniform Update >= 4x reference at P=1" && !strings.Contains(x.Measured, "(0.00–2.00x)") {
			t.Errorf("target measured %q; want the range (0.00–2.00x): lockfree's slowest repeat was 0", x.Measured)
		}
	}
}

// TestAudit92BenchFixedSummarizeInfMedianNaN (audit 92; fixed at stop 58, the text below says what was wrong): Summarize promises the
// median of vals, skipping only NaNs (summary.go, Summarize and Stats),
// but type-7 interpolation multiplies a zero weight by an infinite gap:
// the median of 1, 2, +Inf comes out NaN (it is 2), and of +Inf, +Inf NaN
// (it is +Inf). Not reachable from Run (a repeat's Mops/s is finite),
// only through the exported function.
func TestAudit92BenchFixedSummarizeInfMedianNaN(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		in  []float64
		med float64
	}{{[]float64{1, 2, inf}, 2}, {[]float64{inf, inf}, inf}, {[]float64{-inf, 0, 1}, 0}} {
		if got := Summarize(tc.in).Median; got != tc.med {
			t.Errorf("Summarize(%v).Median = %v; want %v", tc.in, got, tc.med)
		}
	}
}

// TestAudit92BenchZeroBaseRepeatUnbounded: a repeat of the base that
// measured 0 Mops/s makes the ratio's upper bound unbounded: the target
// prints it as "∞", RatioMax stays 0 (absent), and results.json still
// encodes (encoding/json refuses +Inf).
func TestAudit92BenchZeroBaseRepeatUnbounded(t *testing.T) {
	rs := []Result{a92Cell(ClockDefault, ImplLockfree, 10, 10, 10), a92Cell(ClockDefault, ImplReference, 0, 2, 2)}
	fillRatios(rs)
	if lf := rs[0]; lf.Ratio != 5 || lf.RatioMin != 5 || lf.RatioMax != 0 {
		t.Errorf("Ratio, RatioMin, RatioMax = %v, %v, %v; want 5, 5, 0 (unbounded)", lf.Ratio, lf.RatioMin, lf.RatioMax)
	}
	rep := &Report{Meta: Meta{Cores: 2, Count: 3, Spread: DefaultSpread}, Results: rs}
	found := false
	for _, x := range Targets(rep) {
		if x.Target == "uniform Update >= 4x reference at P=1" {
			found = true
			if !strings.Contains(x.Measured, "(5.00–∞x)") {
				t.Errorf("target measured %q; want the range (5.00–∞x)", x.Measured)
			}
		}
	}
	if !found {
		t.Fatal("no uniform P=1 target")
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	if err := WriteMarkdown(&buf, rep); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
}
