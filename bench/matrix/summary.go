package matrix

import (
	"math"
	"slices"
)

// Stats summarises the repeats of one quantity: the median, the extremes,
// the quartiles (linear interpolation between order statistics, R's type
// 7, so the median of an even count is the mean of the middle two), and
// the relative spread (Max-Min)/Median. The zero value describes no
// repeats.
type Stats struct {
	N              int
	Median         float64
	Min, Max       float64
	Q1, Q3         float64
	RelativeSpread float64 // (Max-Min)/Median; 0 when Median is 0
}

// Summarize returns the Stats of vals (NaNs are skipped). It does not
// modify vals.
func Summarize(vals []float64) Stats {
	s := slices.DeleteFunc(slices.Clone(vals), math.IsNaN)
	if len(s) == 0 {
		return Stats{}
	}
	slices.Sort(s)
	st := Stats{N: len(s), Min: s[0], Max: s[len(s)-1],
		Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75)}
	if st.Median != 0 {
		st.RelativeSpread = (st.Max - st.Min) / math.Abs(st.Median)
	}
	return st
}

// IQR is Q3-Q1.
func (s Stats) IQR() float64 { return s.Q3 - s.Q1 }

// Flagged reports whether the spread exceeds limit.
func (s Stats) Flagged(limit float64) bool { return s.N > 1 && s.RelativeSpread > limit }

// quantile is the type-7 q-quantile of sorted, non-empty s.
func quantile(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	f := h - float64(lo)
	switch {
	case f == 0 || s[lo] == s[lo+1] || math.IsInf(s[lo], -1):
		return s[lo] // not 0*Inf or Inf-Inf where a value is infinite
	case math.IsInf(s[lo+1], 1):
		return s[lo+1]
	}
	return s[lo] + f*(s[lo+1]-s[lo])
}

// combine folds the repeats of one cell (each a Result of one repeat, as
// runCell returns it, in round order) into the cell's Result: Mops/s and
// latency percentiles are medians of the repeats' values, with every
// repeat's value kept in the *Runs fields; Ops, Seconds, Samples and
// Mallocs are sums; AllocsPerOp and AdmitRate are over the summed ops;
// Pinned is the fewest pinned workers of any repeat; MemBytes the
// largest. Noisy is set when the Mops/s spread exceeds spread. Ratios are
// left to fillRatios.
func combine(runs []Result, spread float64) Result {
	if len(runs) == 0 {
		return Result{}
	}
	out := runs[0]
	out.Count, out.Ops, out.Seconds, out.Samples, out.Mallocs = 0, 0, 0, 0, 0
	out.MopsRuns, out.P50Runs, out.P99Runs, out.P999Runs = nil, nil, nil, nil
	var admitted float64
	for _, r := range runs {
		out.Count += max(r.Count, 1)
		out.Ops += r.Ops
		out.Seconds += r.Seconds
		out.Samples += r.Samples
		out.Mallocs += r.Mallocs
		admitted += r.AdmitRate * float64(r.Ops)
		out.Pinned = min(out.Pinned, r.Pinned)
		out.MemBytes = max(out.MemBytes, r.MemBytes)
		out.MopsRuns = append(out.MopsRuns, runsOf(r.MopsRuns, r.Mops)...)
		out.P50Runs = append(out.P50Runs, runsOf(r.P50Runs, r.P50Ns)...)
		out.P99Runs = append(out.P99Runs, runsOf(r.P99Runs, r.P99Ns)...)
		out.P999Runs = append(out.P999Runs, runsOf(r.P999Runs, r.P999Ns)...)
	}
	m := Summarize(out.MopsRuns)
	out.Mops, out.MopsMin, out.MopsMax, out.MopsQ1, out.MopsQ3, out.Spread = m.Median, m.Min, m.Max, m.Q1, m.Q3, m.RelativeSpread
	out.Noisy = m.Flagged(spread)
	out.P50Ns = Summarize(out.P50Runs).Median
	out.P99Ns = Summarize(out.P99Runs).Median
	out.P999Ns = Summarize(out.P999Runs).Median
	out.AllocsPerOp, out.AdmitRate = 0, 0
	if out.Ops > 0 {
		out.AllocsPerOp = float64(out.Mallocs) / float64(out.Ops)
		out.AdmitRate = admitted / float64(out.Ops)
	}
	return out
}

// runsOf returns a result's per-repeat values, or its one value when it
// carries none.
func runsOf(runs []float64, v float64) []float64 {
	if len(runs) > 0 {
		return runs
	}
	return []float64{v}
}

// ratioRange is a/b from the medians, with the bounds a.Min/b.Max and
// a.Max/b.Min, noisy when either side is. v is NaN when either is
// missing or b's median is not positive.
type ratioRange struct {
	v, lo, hi float64
	noisy     bool
}

func ratioOf(a, b *Result) ratioRange {
	if a == nil || b == nil || b.Mops <= 0 {
		return ratioRange{math.NaN(), math.NaN(), math.NaN(), false}
	}
	r := ratioRange{v: a.Mops / b.Mops, noisy: a.Noisy || b.Noisy}
	lo, hi := bounds(a)
	blo, bhi := bounds(b)
	r.lo, r.hi = math.NaN(), math.NaN()
	if bhi > 0 {
		r.lo = lo / bhi
	}
	switch {
	case blo > 0:
		r.hi = hi / blo
	case hi > 0:
		r.hi = math.Inf(1) // a repeat of b measured nothing
	}
	return r
}

// bounds returns a result's Mops/s extremes over its repeats, or its
// median twice when it carries none (both 0: a result written before
// repeats were kept). A repeat that measured 0 is a bound of 0.
func bounds(r *Result) (lo, hi float64) {
	if r.MopsMin == 0 && r.MopsMax == 0 {
		return r.Mops, r.Mops
	}
	return r.MopsMin, r.MopsMax
}
