package matrix

import (
	"math"
	"testing"
)

// a93RatioTileRange is the y-range of the lockfree/reference ratio tile
// of update/uniform at P=1 for the given repeats (Mops/s).
func a93RatioTileRange(t *testing.T, lf, ref []float64) (lo, hi float64) {
	t.Helper()
	rs := []Result{a92Cell(ClockDefault, ImplLockfree, lf...), a92Cell(ClockDefault, ImplReference, ref...)}
	fillRatios(rs)
	p, err := ratioTile(newIndex(rs), ClockDefault, ImplLockfree, ImplReference, DistUniform, []string{WorkUpdate}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	return p.Y.Min, p.Y.Max
}

// a93Near reports whether x is within a relative 1e-12 of want.
func a93Near(x, want float64) bool { return math.Abs(x-want) <= 1e-12*math.Abs(want) }

// TestAudit93ReviewRatioPlotFiniteBars: a ratio of 2 whose repeats give
// the range 1.6–2.4 widens the ratio tile's y-range to its error bar
// (1x included: 1/1.1 to 2.4*1.1), and a range 0.5–8 is clipped at a
// factor of two beyond the medians' extent (plot.go, ratioTile: "an
// error bar may widen it by up to a factor of two each way and is
// clipped beyond").
func TestAudit93ReviewRatioPlotFiniteBars(t *testing.T) {
	if lo, hi := a93RatioTileRange(t, []float64{8, 10, 12}, []float64{5, 5, 5}); !a93Near(lo, 1/1.1) || !a93Near(hi, 2.4*1.1) {
		t.Errorf("ratio 2 (1.6–2.4): y-range %v–%v; want %v–%v", lo, hi, 1/1.1, 2.4*1.1)
	}
	if lo, hi := a93RatioTileRange(t, []float64{4, 10, 32}, []float64{4, 5, 8}); !a93Near(lo, 0.5/1.1) || !a93Near(hi, 4*1.1) {
		t.Errorf("ratio 2 (0.5–8): y-range %v–%v; want %v–%v", lo, hi, 0.5/1.1, 4*1.1)
	}
}

// TestAudit93ReviewRatioPlotFixedUnboundedBarDropped (audit 93; fixed at stop 58, the text below says what was wrong): stop 58 made a
// repeat of 0 Mops/s a bound (0 below, +Inf above where it is the
// base's), and the target now prints "2.00x at P=1 (2.00–∞x)" and
// "(0.00–2.00x)" for them, but ratioTile (plot.go) keeps an error bar's
// end only where the bound is positive and finite, so these ratios are
// drawn with no bar on that side at all, as if every repeat agreed, and
// do not widen the y-range: lockfree 10, 10, 10 against reference 0, 5,
// 5 gives the y-range 0.91–2.2 (an unbounded bar clipped at a factor of
// two reaches 4.4), and lockfree 0, 10, 10 against 5, 5, 5 gives
// 0.91–2.2 (a bar down to 0, clipped, reaches 0.45). doc.go (Outputs):
// ratio-<clock>.png has "error bars from the ratio bounds"; ratioTile: "an
// error bar may widen it by up to a factor of two each way and is
// clipped beyond".
func TestAudit93ReviewRatioPlotFixedUnboundedBarDropped(t *testing.T) {
	if _, hi := a93RatioTileRange(t, []float64{10, 10, 10}, []float64{0, 5, 5}); hi < 4*1.1*(1-1e-12) {
		t.Errorf("ratio 2 (2–+Inf): y-range up to %v; want the bar clipped at twice the median, %v", hi, 4*1.1)
	}
	if lo, _ := a93RatioTileRange(t, []float64{0, 10, 10}, []float64{5, 5, 5}); lo > 0.5/1.1*(1+1e-12) {
		t.Errorf("ratio 2 (0–2): y-range from %v; want the bar clipped at half the medians' extent, %v", lo, 0.5/1.1)
	}
}

// TestAudit93ReviewUnboundedPlotsRender: the plots of a report whose
// ratio ranges are (2–∞) and (0–2) render without an error (WritePlots:
// throughput, ratio and latency per clock).
func TestAudit93ReviewUnboundedPlotsRender(t *testing.T) {
	rs := []Result{a92Cell(ClockDefault, ImplLockfree, 10, 10, 10), a92Cell(ClockDefault, ImplReference, 0, 5, 5)}
	hot := []Result{a92Cell(ClockDefault, ImplLockfree, 0, 10, 10), a92Cell(ClockDefault, ImplReference, 5, 5, 5)}
	for i := range hot {
		hot[i].Dist = DistHot1
	}
	rs = append(rs, hot...)
	fillRatios(rs)
	rep := &Report{Meta: Meta{Cores: 2, Count: 3, Spread: DefaultSpread, SampleEvery: 64, Procs: []int{1}}, Results: rs}
	paths, err := WritePlots(rep, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Errorf("plots %v; want throughput, ratio and latency for clock=default", paths)
	}
}
