package meter_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditRateHugeN: ObserveAt refuses an n above MaxFloat32 with a
// "meter:" panic (it used to accept it and cap it silently at the cell's
// MaxFloat32, reading below the events counted), and counts that do add
// up past it saturate at MaxFloat32, as ObserveAt documents.
func TestAuditRateHugeN(t *testing.T) {
	for _, n := range []float64{1e39, math.MaxFloat64, math.Nextafter(math.MaxFloat32, math.Inf(1))} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		var rec any
		func() {
			defer func() { rec = recover() }()
			r.ObserveAt(clk.Now(), "k", n)
		}()
		if s, _ := rec.(string); !strings.HasPrefix(s, "meter:") {
			t.Errorf("n=%g: ObserveAt did not panic with a meter: message (recovered %v)", n, rec)
		}
		if got := r.PerSecondAt(clk.Now(), "k"); got != 0 {
			t.Errorf("n=%g: refused, yet the key reads %g", n, got)
		}
	}
	// MaxFloat32 itself is accepted; two in-range observations whose sum
	// passes it saturate there.
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(1))
	r.ObserveAt(clk.Now(), "k", math.MaxFloat32)
	r.ObserveAt(clk.Now(), "j", 3e38)
	r.ObserveAt(clk.Now(), "j", 3e38)
	for _, k := range []string{"k", "j"} {
		if got := r.PerSecondAt(clk.Now(), k); got != math.MaxFloat32 {
			t.Errorf("%s: PerSecond %g, want the documented saturation at MaxFloat32", k, got)
		}
	}
}

// TestAuditRateNonFinitePanics: ObserveAt panics, with a "meter:"
// message, on +Inf and -Inf as on NaN and -1 (TestBadInput covers those
// two), and leaves the key's counter untouched; -0 and 0 are valid and
// count nothing.
func TestAuditRateNonFinitePanics(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(3))
	r.ObserveAt(clk.Now(), "k", 5)
	for _, n := range []float64{math.Inf(1), math.Inf(-1), -math.SmallestNonzeroFloat64, math.NaN()} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "meter: ") {
					t.Errorf("ObserveAt(%v): panic %q, want a meter: panic", n, s)
				}
			}()
			r.ObserveAt(clk.Now(), "k", n)
		}()
	}
	r.ObserveAt(clk.Now(), "k", 0)
	r.ObserveAt(clk.Now(), "k", math.Copysign(0, -1))
	if got := r.PerSecondAt(clk.Now(), "k"); got != 5 {
		t.Fatalf("after refused and zero observations: %v, want 5", got)
	}
}

// TestAuditRateBackwardsClock: a backwards step of the clock counts as
// zero elapsed time: the estimate neither grows nor decays while the
// clock is behind, and decay resumes from the latest time used once the
// clock passes it again (not from the stepped-back reading). A stale t
// in PerSecondAt/ObserveAt counts as the latest time used.
func TestAuditRateBackwardsClock(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(4, 1024), meter.WithSeed(5))
	t0 := clk.Now()
	r.ObserveAt(t0, "k", 100)
	clk.Advance(500 * time.Millisecond)
	at500 := r.PerSecond("k")
	want := 100 * math.Exp(-0.5)
	if math.Abs(at500-want) > 1e-4*want {
		t.Fatalf("after 500ms: %v, want %v", at500, want)
	}
	for _, back := range []time.Duration{time.Millisecond, 400 * time.Millisecond, time.Hour, 400 * 24 * time.Hour} {
		clk.Set(t0.Add(500*time.Millisecond - back).UnixMilli())
		if got := r.PerSecond("k"); got != at500 {
			t.Fatalf("clock stepped back %v: %v, want %v (zero elapsed)", back, got, at500)
		}
		if got := r.PerSecondAt(t0, "k"); got != at500 {
			t.Fatalf("clock stepped back %v, PerSecondAt(t0): %v, want %v", back, got, at500)
		}
	}
	// The clock catches up to 300 ms: still behind the latest time used.
	clk.Set(t0.Add(300 * time.Millisecond).UnixMilli())
	r.Observe("k") // counted at 500 ms
	if got, w := r.PerSecond("k"), at500+1; math.Abs(got-w) > 1e-5*w {
		t.Fatalf("observe while behind: %v, want %v", got, w)
	}
	clk.Set(t0.Add(1500 * time.Millisecond).UnixMilli())
	if got, w := r.PerSecond("k"), (at500+1)*math.Exp(-1); math.Abs(got-w) > 1e-5*w || got < w {
		t.Fatalf("1 s after the latest time used: %v, want %v", got, w)
	}
}

// TestAuditRateLongIdle: "any idle time, 1 ms to years, decays as the
// reference (int64 ms) does", through the 32-bit stamp horizon (sweeps
// every 2^30 ms, re-bases past 2^31 ms) and through rotations: a Rate
// with a 30-day window idle for 1 ms, 1 day, 20 days, 40 days (past the
// horizon) and 60 days reads the closed form C exp(-t/window), within
// float32 rounding, never below it; idle in one jump or in daily steps
// alike.
func TestAuditRateLongIdle(t *testing.T) {
	const day = 24 * time.Hour
	window := 30 * day
	for _, steps := range []bool{false, true} {
		for _, idle := range []time.Duration{time.Millisecond, day, 20 * day, 40 * day, 60 * day} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(2, 256), meter.WithSeed(11))
			if err != nil {
				t.Fatal(err)
			}
			r.ObserveAt(clk.Now(), "k", 1e6)
			r.ObserveAt(clk.Now(), "other", 3)
			if steps {
				for left := idle; left > 0; left -= day {
					clk.Advance(min(day, left))
					r.PerSecond("other") // touches the meter every day
				}
			} else {
				clk.Advance(idle)
			}
			want := 1e6 * math.Exp(-float64(idle)/float64(window)) / window.Seconds()
			got := r.PerSecond("k")
			if got < want*(1-1e-9) || got > want*(1+1e-5) {
				t.Errorf("steps=%v idle %v: %v, want %v", steps, idle, got, want)
			}
		}
	}
	// A 1 s window idle for years reads 0, and counts afresh after.
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 64))
	r.Observe("k")
	clk.Advance(3 * 365 * day)
	if got := r.PerSecond("k"); got != 0 {
		t.Fatalf("3 years idle: %v", got)
	}
	r.Observe("k")
	if got := r.PerSecond("k"); got != 1 {
		t.Fatalf("after 3 years, one event: %v", got)
	}
}

// TestAuditRateZeroAllocsAt: the At forms and both prefetch settings do
// not allocate ("Observe and PerSecond do not allocate"; Novelty "does
// not allocate"), Novelty's Contains and the At forms included.
func TestAuditRateZeroAllocsAt(t *testing.T) {
	for _, pf := range []bool{true, false} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithPrefetch(pf), meter.WithSize(4, 1024))
		n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithPrefetch(pf), meter.WithSize(4, 1024))
		now := clk.Now()
		for name, f := range map[string]func(){
			"Rate.Observe":       func() { r.Observe("k") },
			"Rate.ObserveAt":     func() { r.ObserveAt(now, "k", 2.5) },
			"Rate.PerSecondAt":   func() { r.PerSecondAt(now, "k") },
			"Novelty.Seen":       func() { n.Seen("k") },
			"Novelty.SeenAt":     func() { n.SeenAt(now, "k2") },
			"Novelty.Contains":   func() { n.Contains("k") },
			"Novelty.ContainsAt": func() { n.ContainsAt(now, "k") },
		} {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("prefetch=%v %s: %v allocs/op", pf, name, a)
			}
		}
	}
}

// TestAuditRateConcurrentSum: N goroutines each observing k events (in
// ones and in ObserveAt(n) batches) on shared keys, on a frozen clock (no
// decay), at GOMAXPROCS 1, 2 and 8: with roomy cells each key's count is
// exactly its events (float32 is exact below 2^24), with every key
// colliding (CellsPerLevel 1) it is never below them (Min never
// under-estimates).
func TestAuditRateConcurrentSum(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const N, k = 8, 500
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		for _, cells := range []uint32{1, 4096} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			r, _ := meter.NewRate(2*time.Second, meter.WithClock(clk), meter.WithSize(3, cells), meter.WithSeed(uint64(procs)))
			var wg sync.WaitGroup
			for g := range N {
				wg.Go(func() {
					key := fmt.Sprint("k", g%3)
					for i := range k {
						if i%2 == 0 {
							r.Observe(key)
						} else {
							r.ObserveAt(clk.Now(), key, 3)
						}
					}
				})
			}
			wg.Wait()
			var want [3]float64
			for g := range N {
				want[g%3] += k / 2 * (1 + 3)
			}
			for i := range 3 {
				got := r.PerSecond(fmt.Sprint("k", i)) * 2 // window 2 s
				if got < want[i] || (cells > 1 && got != want[i]) {
					t.Errorf("procs=%d cells=%d: k%d counts %v, want %v", procs, cells, i, got, want[i])
				}
			}
		}
	}
}
