package meter_test

import (
	"bytes"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit90Day is one day; the scenarios below write other keys every 3
// days, so the horizon sweep (every 2^29 to 2^30 ms, 6.2 to 12.4 days,
// while operations run) re-stamps the idle key's cells.
const audit90Day = 24 * time.Hour

// audit90Floor is the smallest float32, 1.4e-45: the floor
// docs/precision.md ("Scores below 1e-290") says an idle cell under a
// slow law settles at.
const audit90Floor = math.SmallestNonzeroFloat32

// audit90Others are the keys written every 3 days: Rate.Observe,
// Novelty.Seen or an Inflight Acquire/Release, so that sweeps run.
var audit90Others = []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6"}

// audit90Truth is n x exp(-dms/wms): the exact decayed count of n events
// dms whole milliseconds ago under a window of wms ms, to float64's
// precision (relative error below 1e-13 for dms/wms up to 1e3; 0 where
// it is below float64's range).
func audit90Truth(n float64, dms, wms int64) float64 {
	return n * math.Exp(-float64(dms)/float64(wms))
}

// audit90Idle runs the scenario: one observation of n of key "k" at the
// start, then other keys observed every 3 days for days days; check is
// called after each step with the rate read and the exact rate.
func audit90Idle(t *testing.T, window time.Duration, k, n float64, days int, check func(step int, got, truth float64) bool) *meter.Rate {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(90), meter.WithSize(4, 128), meter.WithPeriodWindows(k))
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(clk.Now(), "k", n)
	t0 := clk.NowMillis()
	wms := window.Milliseconds()
	for step := 1; step*3 <= days; step++ {
		clk.Advance(3 * audit90Day)
		r.Observe(audit90Others[step%len(audit90Others)])
		truth := audit90Truth(n, clk.NowMillis()-t0, wms) / window.Seconds()
		if !check(step, r.PerSecond("k"), truth) {
			break
		}
	}
	return r
}

// TestAudit90MeterRateSlowLawIdleFloor: laws between about 1.3e-6/s and
// 6e-4/s (a 30-minute to 5-day window): a key observed once and idle
// for 3 years in a sketch whose other keys are observed every 3 days
// (sweeps run; PeriodWindows keeps one generation for the whole run)
// reads at least its exact decayed rate at every step and, per
// docs/precision.md ("Scores below 1e-290"), at most that plus the
// float32 floor 1.4e-45 (over the window), up to 2^-23 per sweep. Its
// next event then reads 1 event per window, up to one float32 ulp.
func TestAudit90MeterRateSlowLawIdleFloor(t *testing.T) {
	for _, c := range []struct {
		w time.Duration
		k float64
	}{{30 * time.Minute, 1e5}, {time.Hour, 5e4}, {audit90Day, 2000}, {5 * audit90Day, 400}} {
		t.Run(c.w.String(), func(t *testing.T) {
			perSec := 1 / c.w.Seconds()
			r := audit90Idle(t, c.w, c.k, 1, 3*365, func(step int, got, truth float64) bool {
				slack := 1 + float64(step+2)*math.Ldexp(1, -23)
				if got < truth*(1-1e-12) {
					t.Errorf("step %d: PerSecond %.17g below the exact %.17g", step, got, truth)
					return false
				}
				if got > (truth*slack+audit90Floor*perSec)*(1+1e-12) {
					t.Errorf("step %d: PerSecond %.17g above the exact %.17g + 1.4e-45/window", step, got, truth)
					return false
				}
				return true
			})
			r.Observe("k")
			if got := r.PerSecond("k") * c.w.Seconds(); got < 1 || got > 1+math.Ldexp(1, -23)*(1+1e-9) {
				t.Errorf("one event after 3 idle years reads %.17g events, want 1 (+1 float32 ulp)", got)
			}
		})
	}
}

// TestAudit90MeterRateSlowLawIdleFloorSteps (a finding; precision.md now
// says it, and this asserts its bound: at most 1/(1 - f) steps of
// 1.4e-45 above the truth, f the decay over the shortest sweep gap,
// 2^29 ms): docs/precision.md:296-301
// says an idle cell under a law slower than about 6e-4/s in a busy sketch
// "settles at 1.4e-45 and stays there until it is written, above its
// truth by at most 1.4e-45", and :321-323 that a sweep adds "at most one
// float32 ulp (2^-23 relative)". Both hold only for a law faster than
// about 1.3e-6/s (a half-life under 6.2 days). A sweep maps a cell of k
// float32 subnormal ulps (1.4e-45 each) to ceil(k x f) ulps, f the decay
// over the 2^29 to 2^30 ms since the last re-stamp, which is k again for
// every k below 1/(1-f): a slower law holds an idle cell at several ulps
// for good, an ulp is not 2^-23 of the cell there, and a Rate of such a
// key never comes within 1.4e-45/window of its truth. Measured: a
// 30-day window (PeriodWindows 300) 12 years after one event reads 3
// ulps (4.2e-45 events for a truth of 3.9e-64; first past the bound on
// day 2823, at 1.3583e-41 for 1.3580e-41); a 1-year window (the default
// PeriodWindows) after ObserveAt(n = 3e-44) reads 22 ulps (3.08e-44)
// from day 15 to day 1095 while the truth decays to 1.5e-45.
func TestAudit90MeterRateSlowLawIdleFloorSteps(t *testing.T) {
	for _, c := range []struct {
		w    time.Duration
		k, n float64
		days int
	}{{30 * audit90Day, 300, 1, 12 * 365}, {365 * audit90Day, 16, 3e-44, 3 * 365}} {
		t.Run(c.w.String()+"/"+strconv.FormatFloat(c.n, 'g', -1, 64), func(t *testing.T) {
			perSec := 1 / c.w.Seconds()
			f := math.Exp(-float64(1<<29) / float64(c.w.Milliseconds()))
			steps := math.Ceil(1 / (1 - f))
			var first string
			var last [2]float64
			audit90Idle(t, c.w, c.k, c.n, c.days, func(step int, got, truth float64) bool {
				if got < truth*(1-1e-12) {
					t.Errorf("day %d: PerSecond %.17g below the exact %.17g", 3*step, got, truth)
					return false
				}
				slack := 1 + float64(step+2)*math.Ldexp(1, -23)
				if first == "" && got > (truth*slack+steps*audit90Floor*perSec)*(1+1e-12) {
					first = "day " + strconv.Itoa(3*step) + ": " + strconv.FormatFloat(got*c.w.Seconds(), 'g', 5, 64) +
						" events for a truth of " + strconv.FormatFloat(truth*c.w.Seconds(), 'g', 5, 64)
				}
				last = [2]float64{got * c.w.Seconds(), truth * c.w.Seconds()}
				return true
			})
			if first != "" {
				t.Errorf("above the exact count by more than 2^-23 per sweep plus %v steps of 1.4e-45 (docs/precision.md), first on %s; after %d days it reads %.5g events (%.3g float32 ulps) for a truth of %.5g",
					steps, first, c.days, last[0], last[0]/audit90Floor, last[1])
			}
		})
	}
}

// TestAudit90MeterNoveltySlowLawIdleNotSeen: a Novelty's idle cells that
// the sweep holds at the float32 floor (T of 30 minutes to 5 days, so a
// law below 6e-4/s, PeriodWindows keeping one generation for the run)
// are far below the threshold exp(-1): a key seen once is contained
// within T and never after it, for 3 years while other keys are seen
// every 3 days, and is then told new ("seen within the last T"; no key
// is "seen" for ever), once.
func TestAudit90MeterNoveltySlowLawIdleNotSeen(t *testing.T) {
	for _, c := range []struct {
		T time.Duration
		k float64
	}{{30 * time.Minute, 1e5}, {time.Hour, 5e4}, {audit90Day, 2000}, {5 * audit90Day, 400}} {
		t.Run(c.T.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			n, err := meter.NewNovelty(c.T, meter.WithClock(clk), meter.WithSeed(90), meter.WithSize(4, 128), meter.WithPeriodWindows(c.k))
			if err != nil {
				t.Fatal(err)
			}
			if n.Seen("a") {
				t.Fatal("fresh key seen")
			}
			t0 := clk.Now()
			if !n.ContainsAt(t0.Add(c.T-time.Millisecond), "a") {
				t.Fatal("forgotten within T")
			}
			for step := 1; step*3 <= 3*365; step++ {
				clk.Advance(3 * audit90Day)
				n.Seen(audit90Others[step%len(audit90Others)])
				if 3*step*24 > int(c.T/time.Hour) && n.Contains("a") {
					t.Fatalf("day %d: a key seen once, T = %v, still contained", 3*step, c.T)
				}
			}
			if n.Seen("a") {
				t.Fatal("after 3 idle years: told seen")
			}
			if !n.Seen("a") {
				t.Fatal("right after its mark: told new")
			}
		})
	}
}

// TestAudit90MeterInflightIdleYears: Inflight's counts do not decay: 3
// guards held for 3 years while other keys acquire and release every 3
// days (the sweep re-stamps the held cells under the None law) still
// count 3, TryAcquire at max 3 is refused and at 4 admitted, and the
// releases bring the count to exactly 0.
func TestAudit90MeterInflightIdleYears(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	in, err := meter.NewInflight(10, meter.WithClock(clk), meter.WithSeed(90), meter.WithSize(4, 128))
	if err != nil {
		t.Fatal(err)
	}
	var gs []*meter.Guard
	for range 3 {
		gs = append(gs, in.Acquire("k"))
	}
	for step := 1; step*3 <= 3*365; step++ {
		clk.Advance(3 * audit90Day)
		o := audit90Others[step%len(audit90Others)]
		g := in.TryAcquire(o, 1)
		if g == nil {
			t.Fatalf("day %d: TryAcquire(%s, 1) refused with nothing held", 3*step, o)
		}
		g.Release()
		if got := in.Count("k"); got != 3 {
			t.Fatalf("day %d: Count = %d, want 3", 3*step, got)
		}
	}
	if in.TryAcquire("k", 3) != nil {
		t.Fatal("TryAcquire(k, 3) with 3 held: admitted")
	}
	g := in.TryAcquire("k", 4)
	if g == nil {
		t.Fatal("TryAcquire(k, 4) with 3 held: refused")
	}
	g.Release()
	for _, g := range gs {
		g.Release()
	}
	if got := in.Count("k"); got != 0 {
		t.Fatalf("after every release: Count = %d", got)
	}
}

// TestAudit90MeterRateFloorSnapshot: a Rate whose idle key sits at the
// float32 floor (1-hour window, 400 idle days, others observed every 3
// days) restores into a fresh Rate at the snapshot's instant reading
// what the original reads, and one restored a year later (the downtime
// counted) reads at least the exact rate and at most what the original,
// kept running with its traffic, reads then. A Novelty's key marked
// just before the snapshot is still seen T - 1 ms after its mark on the
// restored one, and a long-idle key is new there.
func TestAudit90MeterRateFloorSnapshot(t *testing.T) {
	w := time.Hour
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	opts := func(c *sketchtest.FakeClock, seed uint64) []meter.Option {
		return []meter.Option{meter.WithClock(c), meter.WithSeed(seed), meter.WithSize(4, 128), meter.WithPeriodWindows(5e4)}
	}
	r, err := meter.NewRate(w, opts(clk, 90)...)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := meter.NewNovelty(w, opts(clk, 91)...)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("k")
	nv.Seen("old")
	t0 := clk.NowMillis()
	for step := 1; step*3 <= 400; step++ {
		clk.Advance(3 * audit90Day)
		r.Observe(audit90Others[step%len(audit90Others)])
		nv.Seen(audit90Others[step%len(audit90Others)])
	}
	nv.Seen("fresh")
	var rb, nb bytes.Buffer
	if _, err := r.WriteTo(&rb); err != nil {
		t.Fatal(err)
	}
	if _, err := nv.WriteTo(&nb); err != nil {
		t.Fatal(err)
	}
	before := r.PerSecond("k")
	truthAt := func(ms int64) float64 { return audit90Truth(1, ms-t0, w.Milliseconds()) / w.Seconds() }

	clk2 := sketchtest.NewFakeClock()
	clk2.Set(clk.NowMillis())
	r2, _ := meter.NewRate(w, opts(clk2, 1)...)
	if _, err := r2.ReadFrom(bytes.NewReader(rb.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got := r2.PerSecond("k"); got != before {
		t.Errorf("restored at the instant: %.17g, original %.17g", got, before)
	}
	n2, _ := meter.NewNovelty(w, opts(clk2, 2)...)
	if _, err := n2.ReadFrom(bytes.NewReader(nb.Bytes())); err != nil {
		t.Fatal(err)
	}
	clk2.Advance(w - time.Millisecond)
	if !n2.Contains("fresh") {
		t.Error("restored Novelty: a key marked at the snapshot forgotten within T")
	}
	if n2.Contains("old") || n2.Seen("old") {
		t.Error("restored Novelty: a key idle 400 days is seen")
	}

	// a year later: the original keeps its traffic, the restored one
	// does not run
	for step := 1; step*3 <= 365; step++ {
		clk.Advance(3 * audit90Day)
		r.Observe(audit90Others[step%len(audit90Others)])
	}
	clk3 := sketchtest.NewFakeClock()
	clk3.Set(clk.NowMillis())
	r3, _ := meter.NewRate(w, opts(clk3, 3)...)
	if _, err := r3.ReadFrom(bytes.NewReader(rb.Bytes())); err != nil {
		t.Fatal(err)
	}
	got, orig, truth := r3.PerSecond("k"), r.PerSecond("k"), truthAt(clk.NowMillis())
	if got < truth || got > orig {
		t.Errorf("restored a year later: %.17g, want within [exact %.17g, the running original %.17g]", got, truth, orig)
	}
}
