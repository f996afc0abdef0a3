package matrix

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestAudit93ReviewSummarizeInfinities: the stop 58 quantile keeps the
// order statistic where the weight is 0 or the neighbours are equal, so
// a +Inf above the median, ties at +Inf and a NaN among them give the
// type-7 values: 1, 2, +Inf has median 2, Q1 1.5, Q3 +Inf; 1, +Inf
// median +Inf; +Inf, +Inf median +Inf; 3, 3, 3, +Inf median 3, Q3 +Inf;
// NaNs are skipped. Summarize leaves its argument as it was.
func TestAudit93ReviewSummarizeInfinities(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		in                  []float64
		n                   int
		med, q1, q3, lo, hi float64
	}{
		{[]float64{inf, 1, 2}, 3, 2, 1.5, inf, 1, inf},
		{[]float64{1, inf}, 2, inf, inf, inf, 1, inf},
		{[]float64{inf, inf}, 2, inf, inf, inf, inf, inf},
		{[]float64{3, inf, 3, 3}, 4, 3, 3, inf, 3, inf},
		{[]float64{math.NaN(), inf, 2, math.NaN(), 1}, 3, 2, 1.5, inf, 1, inf},
		{[]float64{0, 0, 5}, 3, 0, 0, 2.5, 0, 5},
	} {
		in := append([]float64(nil), tc.in...)
		s := Summarize(tc.in)
		if s.N != tc.n || s.Median != tc.med || s.Q1 != tc.q1 || s.Q3 != tc.q3 || s.Min != tc.lo || s.Max != tc.hi {
			t.Errorf("Summarize(%v) = %+v; want N %d median %v Q1 %v Q3 %v min %v max %v", in, s, tc.n, tc.med, tc.q1, tc.q3, tc.lo, tc.hi)
		}
		for i := range in {
			if !(in[i] == tc.in[i] || math.IsNaN(in[i]) && math.IsNaN(tc.in[i])) {
				t.Errorf("Summarize modified its argument: %v, was %v", tc.in, in)
				break
			}
		}
	}
	// A median of 0 leaves the spread 0, and one value is never flagged.
	if s := Summarize([]float64{0, 0, 5}); s.RelativeSpread != 0 || s.Flagged(0) {
		t.Errorf("Summarize(0, 0, 5): spread %v flagged %v; want 0, false", s.RelativeSpread, s.Flagged(0))
	}
}

// TestAudit93ReviewSummarizeFixedNegInfQuantileNaN (audit 93; fixed at stop 58, the text below says what was wrong): stop 58 made
// Summarize give the median "where a value was infinite" (docs/migrating.md,
// Stop 58: "Summarize gave a NaN median where a value was infinite ...
// now the median"), but only for +Inf above the interpolation point: with
// -Inf below it, s[lo] + f*(s[lo+1]-s[lo]) is -Inf + Inf = NaN. The
// median of -Inf, 1 comes out NaN (type 7 interpolates between -Inf and 1:
// -Inf), and Q1 of -Inf, 1, 2 NaN (-Inf). Summarize skips only NaNs in
// vals and describes the rest (summary.go, Summarize and Stats). Not
// reachable from Run (Mops/s and latencies are never negative), only
// through the exported function.
func TestAudit93ReviewSummarizeFixedNegInfQuantileNaN(t *testing.T) {
	inf := math.Inf(-1)
	if got := Summarize([]float64{inf, 1}).Median; got != inf {
		t.Errorf("Summarize(-Inf, 1).Median = %v; want -Inf", got)
	}
	if got := Summarize([]float64{inf, 1, 2}).Q1; got != inf {
		t.Errorf("Summarize(-Inf, 1, 2).Q1 = %v; want -Inf", got)
	}
}

// TestAudit93ReviewBounds: bounds (summary.go) gives a result's extremes,
// a 0 repeat included, and its median twice only where both are 0 (a
// result from before repeats were kept); ratioOf's range follows: a base
// repeat of 0 gives +Inf above a positive numerator, and a base median
// of 0 or a missing side no ratio at all.
func TestAudit93ReviewBounds(t *testing.T) {
	for _, tc := range []struct {
		r      Result
		lo, hi float64
	}{
		{Result{Mops: 5, MopsMin: 0, MopsMax: 7}, 0, 7},
		{Result{Mops: 5}, 5, 5},
		{Result{Mops: 0}, 0, 0},
	} {
		if lo, hi := bounds(&tc.r); lo != tc.lo || hi != tc.hi {
			t.Errorf("bounds(%+v) = %v, %v; want %v, %v", tc.r, lo, hi, tc.lo, tc.hi)
		}
	}
	a := &Result{Mops: 10, MopsMin: 10, MopsMax: 10}
	b0 := &Result{Mops: 5, MopsMin: 0, MopsMax: 5}
	if rr := ratioOf(a, b0); rr.v != 2 || rr.lo != 2 || !math.IsInf(rr.hi, 1) {
		t.Errorf("10 over 0..5: %+v; want 2 (2–+Inf)", rr)
	}
	if rr := ratioOf(a, &Result{Mops: 0, MopsMin: 0, MopsMax: 5}); !math.IsNaN(rr.v) {
		t.Errorf("over a median of 0: %+v; want NaN", rr)
	}
	if rr := ratioOf(nil, b0); !math.IsNaN(rr.v) {
		t.Errorf("nil numerator: %+v; want NaN", rr)
	}
}

// TestAudit93ReviewMemoryTableAllocsMedian: the memory table's
// "allocs/op median" is the type-7 median of the implementation's cells
// (stop 58, as every median of the report): cells of 0, 0, 1 and 3
// allocs/op read 0.5 (the nearest-rank median read 0), and the max 3.
func TestAudit93ReviewMemoryTableAllocsMedian(t *testing.T) {
	var rs []Result
	for i, a := range []float64{0, 3, 1, 0} {
		d := AllDists[i]
		rs = append(rs, Result{Clock: ClockDefault, Impl: ImplLockfree, Workload: WorkUpdate, Dist: d, Procs: 1, Count: 1,
			Ops: 100, Mops: 1, AllocsPerOp: a, MemBytes: 2048, MemSource: "sizes"})
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, &Report{Meta: Meta{Cores: 1, Count: 1, SampleEvery: 64}, Results: rs}); err != nil {
		t.Fatal(err)
	}
	if want := "| lockfree | 2.0 KiB (sizes) | 3 | 0.5 | – |"; !strings.Contains(b.String(), want) {
		t.Errorf("memory table lacks %q:\n%s", want, b.String())
	}
}
