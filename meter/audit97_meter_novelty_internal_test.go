package meter

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit97MeterNoveltyDocumentedSweepLengthensMark (audit 97;
// documented at stop 59, the text below says what was wrong; the doc now
// says a mark may last longer by up to T x 2^-23 for each periodic sweep
// of its cells, and the test asserts it): each sweep seen lengthens the
// mark by at most T x 2^-23, and all of them together by at most
// T x 2^-23 x the sweeps the horizon schedule runs (the first at
// 2^30 ms, then one at the first operation 2^29 ms or more after the
// last).
// What was wrong: Novelty's doc (meter/novelty.go:27-29) said "a mark
// may last a little longer: float32 rounding is upward, by up to about
// T x 2^-24 for each periodic sweep of its cells". A sweep stores the
// mark's decayed score s rounded up to a float32, by up to one step, and
// the mark then lasts T x ln(1 + step/s) longer: for s in [0.5, 1) the
// step is 2^-24, so up to T x 2^-24/s, near T x 2^-23 (twice the old
// figure) as s nears 0.5, which it does from 0.51 T to 0.69 T after the
// mark. T = 400 days, one key in one cell, read every day (reads run
// the sweeps): each sweep's lengthening is measured as the growth, from
// one day's read to the next, of the score over the exact
// exp(-age/T'). Measured: 55 sweeps in 400 days; the one on day 251
// (s = 0.53) lengthened the mark by 3,812 ms, 1.85 x T x 2^-24 (2,060
// ms), 0.93 x T x 2^-23; all together 88.6 s, as the doc's measured
// 1 min 26 s.
func TestAudit97MeterNoveltyDocumentedSweepLengthensMark(t *testing.T) {
	within := 400 * 24 * time.Hour
	tms := float64(within.Milliseconds())
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	n, err := NewNovelty(within, WithClock(clk), WithSeed(97), WithSize(1, 1),
		WithHasher(sketch.XXH3()), WithPrefetch(false), WithPeriodWindows(4))
	if err != nil {
		t.Fatal(err)
	}
	n.SeenAt(clk.Now(), "k")
	// The horizon schedule (internal/core/horizon.go): the first sweep at
	// the first operation 2^30 ms or more after the sketch's start, each
	// next one at the first operation 2^29 ms or more after the last.
	due, scheduled := clk.NowMillis()+1<<30, 0
	unit := tms * 0x1p-23 // T x 2^-23 in ms
	worst, worstDay, sweeps := 0.0, 0, 0
	prev := 1.0 // the score over the exact exp(-age/T'): 1 + the roundings so far
	for day := 1; day < 400; day++ {
		clk.Advance(24 * time.Hour)
		if ms := clk.NowMillis(); ms >= due {
			scheduled++
			due = ms + 1<<29
		}
		ratio := n.rot().QueryStringAt(clk.Now(), "k") * math.Exp(float64(day)*86_400_000/tms)
		if ratio < prev*(1-1e-12) {
			t.Fatalf("day %d: the score fell below the exact decay (%.17g of it, was %.17g)", day, ratio, prev)
		}
		if ratio <= prev*(1+0x1p-30) {
			continue // no sweep since yesterday (or one that rounded by less than 2^-30)
		}
		sweeps++
		if l := tms * math.Log(ratio/prev); l > worst {
			worst, worstDay = l, day
		}
		prev = ratio
	}
	total := tms * math.Log(prev)
	t.Logf("%d sweeps seen, %d scheduled; the largest lengthened the mark by %.0f ms = %.3f x T x 2^-23 (day %d); all together %.0f ms = %.2f x T x 2^-23", sweeps, scheduled, worst, worst/unit, worstDay, total, total/unit)
	if sweeps < 20 {
		t.Fatalf("only %d sweeps seen: the schedule checks too little", sweeps)
	}
	if sweeps > scheduled {
		t.Errorf("%d sweeps seen, more than the %d the horizon schedule runs", sweeps, scheduled)
	}
	if worst > unit {
		t.Errorf("T = 400 days: a sweep on day %d lengthened the mark by %.0f ms, %.3f x T x 2^-23 (%.0f ms): the doc says up to T x 2^-23 per sweep", worstDay, worst, worst/unit, unit)
	}
	if total > float64(scheduled)*unit {
		t.Errorf("T = 400 days: %d sweeps lengthened the mark by %.0f ms in all, above %d x T x 2^-23 = %.0f ms", scheduled, total, scheduled, float64(scheduled)*unit)
	}
}
