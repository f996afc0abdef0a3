package meter

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit97Ceil returns the least float64 at or above c x 1e9 / w_ns,
// computed exactly (math/big): "C/window rounded up", Rate's doc
// (meter/rate.go:59-60).
func audit97Ceil(c float64, w time.Duration) float64 {
	x := new(big.Rat).SetFloat64(c)
	x.Mul(x, big.NewRat(1e9, int64(w)))
	f, _ := x.Float64()
	if new(big.Rat).SetFloat64(f).Cmp(x) < 0 {
		f = math.Nextafter(f, math.Inf(1))
	}
	return f
}

// audit97Below reports whether q is below c x 1e9 / w_ns, exactly.
func audit97Below(q, c float64, w time.Duration) bool {
	x := new(big.Rat).SetFloat64(c)
	x.Mul(x, big.NewRat(1e9, int64(w)))
	return new(big.Rat).SetFloat64(q).Cmp(x) < 0
}

// audit97Least reports whether q is the least float64 not below
// c x 1e9 / w_ns: q is not below it and math.Nextafter(q, 0) is, both
// compared exactly (math/big).
func audit97Least(q, c float64, w time.Duration) bool {
	return !audit97Below(q, c, w) && audit97Below(math.Nextafter(q, 0), c, w)
}

// audit97Steps is how many float64 steps q lies above want (both
// positive, finite).
func audit97Steps(q, want float64) int64 {
	return int64(math.Float64bits(q)) - int64(math.Float64bits(want))
}

// audit97NewRate is a Rate with one cell, no rotation within the test,
// on clk.
func audit97NewRate(t *testing.T, w time.Duration, periods float64, clk *sketchtest.FakeClock) *Rate {
	t.Helper()
	r, err := NewRate(w, WithClock(clk), WithSeed(97), WithSize(1, 1),
		WithHasher(sketch.XXH3()), WithPrefetch(false), WithPeriodWindows(periods))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit97MeterPerSecondCeilOfFloat32Counts: a count read at the
// instant of its writes is a float32 (c x 1e9 is then exact in a
// float64), and for every window up to 2^53 ns PerSecond is exactly
// the least float64 at or above C/window (meter/rate.go:59-60); for
// any count from 2^-900 up to MaxFloat32 and any window up to the 2^62 ns
// limit it is never below C/window and finite. Windows: 1 ms,
// 1.000001 ms, 1.1 ms, 2^20 ns, 130 ms, 1 s, 1 min, 1 h, 2^53 - 1,
// 2^53, 2^53 + 1, 2^53 + 3, 2^60 + 255, 2^62 - 1, 2^62 ns, and a
// fixed-seed sample.
func TestAudit97MeterPerSecondCeilOfFloat32Counts(t *testing.T) {
	ws := []time.Duration{time.Millisecond, 1_000_001, 1_100_000, 1 << 20, 130 * time.Millisecond,
		time.Second, time.Minute, time.Hour, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1<<53 + 3, 1<<60 + 255, 1<<62 - 1, 1 << 62}
	rng := rand.New(rand.NewPCG(97, 1))
	for range 40 {
		ws = append(ws, time.Millisecond+time.Duration(rng.Int64N(int64(20*time.Second))))
	}
	for range 10 {
		ws = append(ws, time.Millisecond+time.Duration(rng.Int64N(1<<62-int64(time.Millisecond))))
	}
	clk := sketchtest.NewFakeClock()
	for _, w := range ws {
		r := audit97NewRate(t, w, 1, clk)
		counts := []float64{math.MaxFloat32, 1, 13, 1 << 24, 1<<24 + 2, 0.1, math.SmallestNonzeroFloat32, 0x1p-900, 0x1.fffffffffffffp-900, 1e-200, 1e30}
		for range 300 {
			counts = append(counts, float64(float32(math.Ldexp(1+rng.Float64(), rng.IntN(256)-149))))
			counts = append(counts, math.Ldexp(1+rng.Float64(), rng.IntN(1028)-900))
		}
		for _, c := range counts {
			if c > math.MaxFloat32 {
				continue
			}
			q := r.perSecond(c)
			if math.IsInf(q, 0) || math.IsNaN(q) {
				t.Fatalf("window %d ns, count %v: PerSecond %v, want finite", int64(w), c, q)
			}
			if c >= 0x1p-900 && audit97Below(q, c, w) {
				t.Fatalf("window %d ns, count %b: PerSecond %v below the exact C/window", int64(w), c, q)
			}
			if float64(float32(c)) == c && c >= 0x1p-900 && w <= 1<<53 {
				if want := audit97Ceil(c, w); q != want {
					t.Fatalf("window %d ns, float32 count %v: PerSecond %v, want C/window rounded up %v (%d steps)", int64(w), c, q, want, audit97Steps(q, want))
				}
			}
		}
	}
	// Through the API: MaxFloat32 events at one instant on a 1 ms window
	// read MaxFloat32 x 1000 rounded up, finite.
	clk.Set(1_000_000)
	r := audit97NewRate(t, time.Millisecond, 1, clk)
	now := clk.Now()
	r.ObserveAt(now, "k", math.MaxFloat32)
	if got, want := r.PerSecondAt(now, "k"), audit97Ceil(math.MaxFloat32, time.Millisecond); got != want {
		t.Fatalf("MaxFloat32 on 1 ms at its instant: PerSecond %v, want %v", got, want)
	}
}

// TestAudit97MeterPerSecondFixedOneSecondWindowAboveCount (audit 97; fixed at stop 59, the text below says what was wrong; PerSecond now divides exactly, rounding once, upward).
// Also asserted now: the result is the least float64 not below the
// exact quotient (math.Nextafter(q, 0) is below it, by math/big).
// What was wrong:
// Rate's doc (meter/rate.go:59-60): "PerSecond is C/window rounded up
// (never below the exact quotient of the count read)", and
// docs/precision.md:305 "`PerSecond` divides C by the window rounding
// up". On a 1 s window C/window is C itself, a float64: PerSecond must
// return the count read. For a decayed count (a float64 with a full
// mantissa) c x 1e9 is not exact, perSecond's quotient of the rounded
// product lands above C and its loop only ever moves up: a count of
// 989.0602787753687 reads 989.0602787753688/s, one step above
// C/window (the code before stop 59 multiplied by 1/window = 1 and read
// C). Here 101 of 3,000 decayed counts on a 1 s window read so; 0.4%
// of full-mantissa counts on a 1-minute window.
func TestAudit97MeterPerSecondFixedOneSecondWindowAboveCount(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r := audit97NewRate(t, time.Second, 1000, clk)
	if c := 989.0602787753687; r.perSecond(c) != c || !audit97Least(r.perSecond(c), c, time.Second) {
		t.Errorf("window 1 s, count %v: perSecond %v, want the count (C/1 s, exact)", c, r.perSecond(c))
	}
	r.ObserveAt(clk.Now(), "k", 1000)
	above := 0
	for d := 1; d <= 3000; d++ {
		clk.Advance(time.Millisecond)
		at := clk.Now()
		c := r.r.QueryStringAt(at, "k")
		q := r.PerSecondAt(at, "k")
		if q < c {
			t.Fatalf("+%d ms: PerSecond %v below the count %v", d, q, c)
		}
		if !audit97Least(q, c, time.Second) {
			t.Fatalf("+%d ms: count %v, PerSecond %v: not the least float64 not below C/window", d, c, q)
		}
		if q != c {
			if above == 0 {
				t.Errorf("1000 events, read %d ms later on a 1 s window: count %v, PerSecond %v (%d steps above C/window)", d, c, q, audit97Steps(q, c))
			}
			above++
		}
	}
	if above > 0 {
		t.Errorf("%d of 3000 reads on a 1 s window were above C/window rounded up (the count itself)", above)
	}
}

// TestAudit97MeterPerSecondFixedLongWindowAboveCeiling (audit 97; fixed at stop 59, the text below says what was wrong; PerSecond now divides exactly, rounding once, upward).
// Also asserted now: the result is the least float64 not below the
// exact quotient (math.Nextafter(q, 0) is below it, by math/big).
// What was wrong:
// meter/rate.go:59-60 "PerSecond is C/window rounded up". NewRate takes
// a window above 2^53 ns that a float64 cannot hold as the float64 below
// it (rate.go:95-98), and perSecond rounds up C x 1e9 over that smaller
// number: up to 3 float64 steps above C/window rounded up. Window 2^60 +
// 255 ns (36.5 years, PeriodWindows 1: allowed up to 2^62 ns): 13 events
// read at their instant (C = 13 exactly) give 1.1275702593849246e-08/s,
// one step above C/window rounded up, 1.1275702593849244e-08; 99.6% of
// float32 counts read one step high there, 46% of full-mantissa counts
// two steps. (Never below: only the "rounded up" sentence fails.)
func TestAudit97MeterPerSecondFixedLongWindowAboveCeiling(t *testing.T) {
	w := time.Duration(1<<60 + 255)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r := audit97NewRate(t, w, 1, clk)
	now := clk.Now()
	r.ObserveAt(now, "k", 13)
	got := r.PerSecondAt(now, "k")
	want := audit97Ceil(13, w)
	if audit97Below(got, 13, w) {
		t.Fatalf("window %d ns: PerSecond %v below 13/window", int64(w), got)
	}
	if got != want || !audit97Least(got, 13, w) {
		t.Errorf("window %d ns, 13 events read at their instant: PerSecond %v, want C/window rounded up %v (%d steps above)", int64(w), got, want, audit97Steps(got, want))
	}
	// Windows past 2^53 ns, float32 and full-mantissa (decayed) counts:
	// each reads the least float64 not below C/window.
	rng := rand.New(rand.NewPCG(97, 4))
	for _, w := range []time.Duration{1<<53 + 1, 1<<53 + 3, 1<<60 + 255, 1<<62 - 1, 1 << 62} {
		r := audit97NewRate(t, w, 1, clk)
		bad := 0
		for i := range 400 {
			c := math.Ldexp(1+rng.Float64(), rng.IntN(120)-20)
			if i%2 == 0 {
				c = float64(float32(c))
			}
			if q := r.perSecond(c); !audit97Least(q, c, w) {
				if bad == 0 {
					t.Errorf("window %d ns, count %v: PerSecond %v, want the least float64 not below C/window %v (%d steps)", int64(w), c, q, audit97Ceil(c, w), audit97Steps(q, audit97Ceil(c, w)))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("window %d ns: %d of 400 counts not read as C/window rounded up", int64(w), bad)
		}
	}
}

// TestAudit97MeterPerSecondFixedTinyCountBelowExact (audit 97; fixed at stop 59, the text below says what was wrong; PerSecond now divides exactly, rounding once, upward).
// Also asserted now: the result is the least float64 not below the
// exact quotient (math.Nextafter(q, 0) is below it, by math/big).
// What was wrong:
// meter/rate.go:59-60: PerSecond is "never below the exact quotient of
// the count read". perSecond's branch for C < 2^-900 (rate.go:142-145)
// returns the next float64 above (C x 1e9)/ns, both rounded to
// nearest, on the ground that "two roundings of a quotient this small
// are less than one of its steps apart": false for a normal quotient,
// where the product's half step, carried through the division, is up to
// 1/m of the quotient's step (m the window's significand in [1, 2)) and
// the division adds half a step. Window 45.8 s, C =
// 5160493374642220 x 2^-1002 (1.2e-286): PerSecond 2.628875938908562e-288,
// below the exact quotient (C/window rounded up is
// 2.6288759389085622e-288). Such counts are read: a Rate key idle
// about 624 to 708 windows (1 event on a 1.1 ms window, read 686 to 779
// ms later, under a PeriodWindows that keeps its generation) holds a
// decayed float64 count there (a read does not round it to a float32);
// here 118 of 31,200 such reads (0.4%) return below C/window. Windows
// up to about 14 minutes (29 in a sketch younger than 12.4 days) get
// there before the horizon sweep re-stamps the idle cell to a float32
// (at least 1.4e-45, where the main path applies).
func TestAudit97MeterPerSecondFixedTinyCountBelowExact(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	{
		w := 45800 * time.Millisecond
		r := audit97NewRate(t, w, 1000, clk)
		c := math.Ldexp(5160493374642220, -1002)
		if q := r.perSecond(c); !audit97Least(q, c, w) {
			t.Errorf("window %v, count %v: perSecond %v, want the least float64 not below the exact C/window, %v", w, c, q, audit97Ceil(c, w))
		}
	}
	w := 1_100_000 * time.Nanosecond
	r := audit97NewRate(t, w, 1e6, clk)
	rng := rand.New(rand.NewPCG(97, 2))
	reads, below, notLeast := 0, 0, 0
	for range 300 {
		t0 := clk.NowMillis()
		r.ObserveAt(clk.Now(), "k", float64(float32(1+rng.Float64())))
		clk.Set(t0 + 679)
		for d := 680; d <= 790; d++ {
			clk.Advance(time.Millisecond)
			ta := clk.Now()
			c := r.r.QueryStringAt(ta, "k")
			if c == 0 || c >= 0x1p-900 {
				continue
			}
			reads++
			q := r.PerSecondAt(ta, "k")
			if audit97Below(q, c, w) {
				if below == 0 {
					t.Errorf("window %v, read %d ms after the write: count %v, PerSecond %v below the exact C/window (rounded up: %v)", w, d, c, q, audit97Ceil(c, w))
				}
				below++
			} else if !audit97Least(q, c, w) {
				if notLeast == 0 {
					t.Errorf("window %v, read %d ms after the write: count %v, PerSecond %v, not the least float64 not below C/window, %v", w, d, c, q, audit97Ceil(c, w))
				}
				notLeast++
			}
		}
		clk.Set(t0 + 1000)
	}
	if reads < 10000 {
		t.Fatalf("only %d reads of counts below 2^-900: the schedule checks too little", reads)
	}
	if below > 0 {
		t.Errorf("%d of %d reads of counts below 2^-900 on a %v window were below C/window", below, reads, w)
	}
	if notLeast > 0 {
		t.Errorf("%d of %d reads of counts below 2^-900 on a %v window were above C/window rounded up", notLeast, reads, w)
	}
}

// TestAudit97MeterRateDocumentedSameMsAddsRoundOnDecayedCount (audit
// 97; documented at stop 59, the text below says what was wrong; the doc
// now says whole n add exactly only while the count is whole and below
// 2^24, a +1 carrying a decayed, fractional count past a power of two
// being a rounding that stores the sum up to one float32 step high, and
// the test asserts it): the 70,000 adds end within one float32 step per
// rounding add of the exact sum, never below it; every add that does
// not add exactly is one the doc names (a fractional count carried past
// a power of two) and rounds up by at most one step of the sum stored;
// and adds on a whole count below 2^24 are exact.
// What was wrong: docs/precision.md:301-302: "Writes within one
// millisecond add exactly while C stays below 2^24 (a +1 on a whole
// count is a float32)", and Rate's doc (meter/rate.go:38-40) had only
// "the first write of each millisecond" round. A count is whole only
// until it decays: the first write of a millisecond stores a fractional
// float32, and each later +1 that carries it across a power of two drops
// its lowest bit, rounding up. 100 events, then 1 ms later 1 + 70,000
// events in that millisecond on a 1-minute window: the first write
// stores 100.99833679199219, the next 70,000 store 70101, not
// 70100.99833679199. (Within the rule's 2^-23 x written ms x count; the
// sentence is what failed.)
func TestAudit97MeterRateDocumentedSameMsAddsRoundOnDecayedCount(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r := audit97NewRate(t, time.Minute, 1000, clk)
	r.ObserveAt(clk.Now(), "k", 100)
	clk.Advance(time.Millisecond)
	r.ObserveAt(clk.Now(), "k", 1)
	c1 := r.r.QueryString("k")
	if c1 == math.Trunc(c1) {
		t.Fatalf("the count after the decay is whole (%v): the scenario expects a fractional one", c1)
	}
	// step is one float32 step of a float32 x > 0 (normal).
	step := func(x float64) float64 {
		return float64(math.Nextafter32(float32(x), float32(math.Inf(1)))) - x
	}
	exact := new(big.Float).SetPrec(200).SetFloat64(c1)
	allowed := 0.0 // the sum of one step of the sum stored, per rounding add
	prev, rounded := c1, 0
	for i := range 70000 {
		r.ObserveAt(clk.Now(), "k", 1)
		exact.Add(exact, big.NewFloat(1))
		c := r.r.QueryString("k")
		if c == prev+1 {
			prev = c
			continue
		}
		rounded++
		// A rounding add: the doc names it only where a fractional count
		// is carried past a power of two.
		if prev == math.Trunc(prev) || math.Floor(math.Log2(prev)) == math.Floor(math.Log2(prev+1)) {
			t.Errorf("add %d: %v + 1 stored %v, a rounding the doc does not name (the count is whole, or no power of two is crossed)", i+1, prev, c)
		}
		if c < prev+1 || c-(prev+1) > step(c) {
			t.Errorf("add %d: %v + 1 stored %v: %.3g off, want 0 to one float32 step (%.3g) up", i+1, prev, c, c-(prev+1), step(c))
		}
		allowed += step(c)
		prev = c
	}
	c2 := r.r.QueryString("k")
	want, _ := exact.Float64()
	over, _ := new(big.Float).Sub(new(big.Float).SetPrec(200).SetFloat64(c2), exact).Float64()
	t.Logf("%v, then 70,000 adds of 1 in the same ms: %v, exact %v; %d rounding adds, %.3g over, allowed %.3g", c1, c2, want, rounded, over, allowed)
	if over < 0 {
		t.Errorf("a count of %v, then 70,000 writes of 1 in the same ms: %v, below the exact sum %v", c1, c2, want)
	}
	if over > allowed {
		t.Errorf("a count of %v, then 70,000 writes of 1 in the same ms: %v, %.3g above the exact sum %v, more than one float32 step per rounding add (%d adds, %.3g)", c1, c2, over, want, rounded, allowed)
	}
	// A whole count below 2^24 adds exactly (a fresh Rate: one cell).
	r = audit97NewRate(t, time.Minute, 1000, clk)
	r.ObserveAt(clk.Now(), "w", 5)
	for range 1000 {
		r.ObserveAt(clk.Now(), "w", 1)
	}
	if c := r.r.QueryString("w"); c != 1005 {
		t.Errorf("a whole count of 5, then 1,000 writes of 1 in its ms: %v, want 1005 (exact)", c)
	}
}
