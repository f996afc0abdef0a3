package meter_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit96OneCellRate is a Rate whose one key sits alone in one cell, with
// no rotation during the run (PeriodWindows 1000) and a fast hash.
func audit96OneCellRate(t *testing.T, w time.Duration, clk *sketchtest.FakeClock) *meter.Rate {
	t.Helper()
	r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSeed(96), meter.WithSize(1, 1),
		meter.WithHasher(sketch.XXH3()), meter.WithPrefetch(false), meter.WithPeriodWindows(1000))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit96MeterRateDocumentedFiguresAfterDrop (audit 96; documented
// at stop 59, the text below says what was wrong). Rate's doc said "a
// key written every millisecond reads high by up to about window_ms x
// 2^-23 of its count: 0.2% at 1 minute, 2% at 10 minutes, up to 16% at 1
// hour (measured)": figures measured on keys whose rate rose from 0,
// below the formula's own 0.7%, 7% and 43%. A key whose count falls
// reads higher: each ms's write stores the decayed count rounded up to a
// float32, so the count stops decaying once a millisecond's decay net of
// its events, C/window_ms - k, is below one float32 step of C. Here a
// count left by a burst just inside that band, then 1 event every ms:
// 0.36% high at 1 minute (after three windows), 3.8% at 10 minutes and
// 27% at 1 hour (after one). The doc now gives the formula's figures and
// these measured ones (0.4%, 4%, 27%); the test asserts them and the
// formula.
func TestAudit96MeterRateDocumentedFiguresAfterDrop(t *testing.T) {
	for _, c := range []struct {
		w       time.Duration
		burst   float64 // a float32 just below window_ms x (1 + ulp): the band's top
		windows int64   // of 1 event a ms after the burst
		figure  float64 // the doc's measured "after a burst"
		full    bool    // run only at full size (millions of writes)
	}{
		{time.Minute, 60230, 3, 0.004, false},     // ulp 2^-8 in [2^15, 2^16)
		{10 * time.Minute, 637000, 1, 0.04, true}, // ulp 2^-4 in [2^19, 2^20)
		{time.Hour, 5_390_000, 1, 0.27, true},     // ulp 2^-1 in [2^22, 2^23)
	} {
		if c.full && testsize.Small() {
			continue
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r := audit96OneCellRate(t, c.w, clk)
		wms := c.w.Milliseconds()
		r.ObserveAt(clk.Now(), "k", c.burst)
		truth := c.burst
		f := math.Exp(-1 / float64(wms)) // the decay over 1 ms
		for range c.windows * wms {
			clk.Advance(time.Millisecond)
			r.Observe("k")
			truth = truth*f + 1
		}
		got := r.PerSecond("k") * c.w.Seconds()
		formula := float64(wms) * 0x1p-23
		if got < truth*(1-1e-9) {
			t.Fatalf("window %v: count %.1f below the exact %.1f", c.w, got, truth)
		}
		if (got-truth)/got > formula {
			t.Fatalf("window %v: count %.1f, exact %.1f: above window_ms x 2^-23 = %.4g of the count", c.w, got, truth, formula)
		}
		if ratio := got / truth; ratio > 1+c.figure {
			t.Errorf("window %v: a key written every ms (1 event) after a burst of %.0f reads %.1f after %d windows, exact %.1f: %.2f%% high; Rate's doc says %.1f%% measured", c.w, c.burst, got, c.windows, truth, 100*(ratio-1), 100*c.figure)
		}
	}
}

// TestAudit96MeterRateFixedZeroWritesKeepRounding (audit 96; fixed at
// stop 59, the text below says what was wrong). A byte meter (ObserveAt's
// n is "bytes, cost") whose key saw a transfer of 1e6, then requests of
// 0 bytes every ms: each ObserveAt of 0 re-stamped the key's cell with
// its decayed count rounded up, and those roundings, kept from decaying
// by the next, compounded: on a 1-minute window the count was above the
// exact one by 0.76% of itself after three windows, 1.53% after six,
// growing without bound (past 2^24 ms windows it never decayed at all).
// An ObserveAt of 0 now reads instead of writing: the count decays from
// the transfer's stamp in one step.
func TestAudit96MeterRateFixedZeroWritesKeepRounding(t *testing.T) {
	w := time.Minute
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r := audit96OneCellRate(t, w, clk)
	wms := w.Milliseconds()
	r.ObserveAt(clk.Now(), "k", 1e6)
	for range 6 * wms {
		clk.Advance(time.Millisecond)
		r.ObserveAt(clk.Now(), "k", 0)
	}
	truth := 1e6 * math.Exp(-6)
	got := r.PerSecond("k") * w.Seconds()
	if got < truth*(1-1e-12) || got > truth*(1+1e-9) {
		t.Errorf("window %v, 1e6 then n = 0 every ms for 6 windows: count %.9g, exact %.9g (ratio %.12f): want within 1e-9 of it", w, got, truth, got/truth)
	}
}

// TestAudit96MeterRateRoundingByWrittenMs checks the rule Rate's doc
// states for the float32 rounding (stop 59: each rounding since a part
// of the count came adds up to 2^-23 of that part as stored), in its
// averaged form, which schedules like this one keep to: a key reads high
// by up to 2^-23 x the written milliseconds since its events, averaged
// over the count they left, and never below the truth. One key in one cell, a
// 1-minute window, 3 windows of a fixed-seed schedule: bursts, runs of
// 1 to 5 events a ms, silent gaps and writes of 0, one write per written
// millisecond (whole counts below 2^24, where same-ms adds are exact).
// The exact count T and its weighted age A (the sum over the count's
// parts of each part's written milliseconds since it came) decay alike;
// a written ms adds T to A before its events come (they count it too).
func TestAudit96MeterRateRoundingByWrittenMs(t *testing.T) {
	w := time.Minute
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r := audit96OneCellRate(t, w, clk)
	wms := float64(w.Milliseconds())
	rng := rand.New(rand.NewPCG(96, 59))
	truth, age := 0.0, 0.0
	worst := 0.0
	for ms := range 3 * int(wms) {
		clk.Advance(time.Millisecond)
		f := math.Exp(-1 / wms)
		truth, age = truth*f, age*f
		var n float64
		switch x := rng.IntN(1000); {
		case x < 2:
			n = float64(1 + rng.IntN(200_000)) // a burst
		case x < 600:
			n = float64(1 + rng.IntN(5))
		case x < 700:
			n = 0 // a write of 0: reads
		default:
			continue // silent
		}
		r.ObserveAt(clk.Now(), "k", n)
		if n > 0 {
			age += truth + n
			truth += n
		}
		if ms%997 != 0 {
			continue
		}
		got := r.PerSecond("k") * w.Seconds()
		if got < truth*(1-1e-9) {
			t.Fatalf("ms %d: count %.3f below the exact %.3f", ms, got, truth)
		}
		bound := age * 0x1p-23 * (1 + 1e-6)
		if got-truth > bound+truth*1e-9 {
			t.Fatalf("ms %d: count %.3f, exact %.3f: %.4g high, above 2^-23 x written ms x count = %.4g", ms, got, truth, got-truth, bound)
		}
		worst = max(worst, (got-truth)/bound)
	}
	t.Logf("worst: %.3f of the bound", worst)
	if worst == 0 {
		t.Fatal("the schedule never rounded: the test checks nothing")
	}
}

// TestAudit96MeterRateBatchedLongWindow: Rate's doc (meter/rate.go:47-49;
// and docs/precision.md:316-319) advise, for a hot key on a long window,
// to "observe in batches (ObserveAt with n > 1 takes the rounding once
// per batch)". A key at
// 10,000 events a second on a 1-hour window (3.6e7 a window: past the
// 2^24 where single Observes run away) counted as one ObserveAt of
// 10,000 per second stays within (writes per window) x 2^-23 of the
// truth, never below it, for four windows; so does 5,000 a second in
// batches of 500 every 100 ms.
func TestAudit96MeterRateBatchedLongWindow(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		n     float64
	}{{time.Second, 10_000}, {100 * time.Millisecond, 500}} {
		w := time.Hour
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r := audit96OneCellRate(t, w, clk)
		f := math.Exp(-float64(c.every.Milliseconds()) / float64(w.Milliseconds()))
		writes := int(w / c.every)
		bound := float64(writes) * 0x1p-23
		truth := 0.0
		for i := 1; i <= 4*writes; i++ {
			clk.Advance(c.every)
			r.ObserveAt(clk.Now(), "k", c.n)
			truth = truth*f + c.n
			if i%writes != 0 {
				continue
			}
			got := r.PerSecondAt(clk.Now(), "k") * w.Seconds()
			if got < truth*(1-1e-12) || got > truth*(1+bound) {
				t.Errorf("batches of %v every %v, window %d: count %.1f, exact %.1f (ratio %.6f), want within [1, 1 + %.3g]", c.n, c.every, i/writes, got, truth, got/truth, bound)
			}
		}
	}
}
