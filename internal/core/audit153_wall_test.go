package core

import (
	"io"
	"math"
	"math/big"
	"testing"
	"time"
)

// a153Floor is floor((t - a) / 1 ms) + anchorMs, exact, saturated.
func a153Floor(anchorMs int64, t, a time.Time) int64 {
	ns := func(x time.Time) *big.Int {
		v := big.NewInt(x.Unix())
		v.Mul(v, big.NewInt(1e9))
		return v.Add(v, big.NewInt(int64(x.Nanosecond())))
	}
	d := ns(t)
	d.Sub(d, ns(a))
	d.Div(d, big.NewInt(1e6)) // Euclidean = floor for a positive divisor
	d.Add(d, big.NewInt(anchorMs))
	switch {
	case d.IsInt64():
		return d.Int64()
	case d.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// TestAudit153ConvertAcross292YearsExactAndMonotone: for anchors with a
// fraction of a millisecond (0, 1 ns, 0.5 ms, 1 ms - 1 ns; with and
// without a monotonic reading) and anchor readings across the int64 ms
// range, convert(t) for t within +-3 ms of anchor +- MaxInt64 ns (where
// Sub saturates and the far path takes over) equals the exact floor of
// (t - anchor) in ms plus the anchor's reading, and is non-decreasing
// in t across the boundary on both sides.
func TestAudit153ConvertAcross292YearsExactAndMonotone(t *testing.T) {
	fracs := []int64{0, 1, 500_000, 999_999}
	anchorsMs := []int64{math.MinInt64, -1 << 61, -1, 0, 1, 1 << 61, math.MaxInt64}
	var steps []time.Duration
	for k := -3_000_001; k <= 3_000_001; k += 250_000 {
		steps = append(steps, time.Duration(k))
	}
	steps = append(steps, -1, 0, 1)
	for _, fr := range fracs {
		for _, mono := range []bool{false, true} {
			base := time.Unix(1_700_000_000, fr)
			if mono {
				now := time.Now()
				base = now.Add(time.Duration(fr - int64(now.Nanosecond())))
			}
			for _, am := range anchorsMs {
				tb := NewTimebase(&a152Plain{am})
				tb.anchor, tb.anchorMs = base, am
				for _, edge := range []time.Duration{math.MaxInt64, math.MinInt64} {
					prev := int64(math.MinInt64)
					first := true
					// sort steps ascending
					ss := append([]time.Duration(nil), steps...)
					for i := 1; i < len(ss); i++ {
						for j := i; j > 0 && ss[j] < ss[j-1]; j-- {
							ss[j], ss[j-1] = ss[j-1], ss[j]
						}
					}
					for _, s := range ss {
						tt := base.Add(edge).Add(s)
						got := tb.convert(tt)
						want := a153Floor(am, tt, base)
						if got != want {
							t.Errorf("frac %d mono %v anchor %d: convert(anchor%+d ns%+d ns) = %d, want %d", fr, mono, am, int64(edge), s, got, want)
						}
						if !first && got < prev {
							t.Errorf("frac %d mono %v anchor %d: convert not monotone at anchor%+d ns%+d ns: %d after %d", fr, mono, am, int64(edge), s, got, prev)
						}
						prev, first = got, false
					}
				}
			}
		}
	}
}

// TestAudit153WallMillisSaturatesAndMatchesUnixMilli: WallMillis is
// t.UnixMilli() wherever that fits int64 (floored for times before
// 1970), MaxInt64/MinInt64 past the ends, and non-decreasing.
func TestAudit153WallMillisSaturatesAndMatchesUnixMilli(t *testing.T) {
	ts := []time.Time{
		time.Unix(math.MinInt64, 0), time.UnixMilli(math.MinInt64).Add(-time.Nanosecond),
		time.UnixMilli(math.MinInt64), time.UnixMilli(math.MinInt64).Add(999_999),
		time.UnixMilli(-1 << 61), time.Unix(0, -1), time.Unix(0, 0), time.Unix(0, 999_999),
		time.UnixMilli(1 << 61), time.UnixMilli(math.MaxInt64), time.UnixMilli(math.MaxInt64).Add(999_999),
		time.UnixMilli(math.MaxInt64).Add(time.Millisecond), time.Unix(math.MaxInt64, 999_999_999),
	}
	want := []int64{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, -1 << 61, -1, 0, 0,
		1 << 61, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}
	prev := int64(math.MinInt64)
	for i, x := range ts {
		got := WallMillis(x)
		if got != want[i] {
			t.Errorf("WallMillis(%v) = %d, want %d", x, got, want[i])
		}
		if got < prev {
			t.Errorf("WallMillis not monotone at %v", x)
		}
		prev = got
	}
}

// TestAudit153WallMillisAllocs reports WallMillis's allocations (a
// measurement for the report; it asserts nothing beyond running).
func TestAudit153WallMillisAllocs(t *testing.T) {
	now := time.Now()
	n := testing.AllocsPerRun(100, func() { _ = WallMillis(now) })
	t.Logf("WallMillis allocs per call: %v", n)
}

// TestAudit153SnapshotWriteToAllocsNoWorse: the allocations of
// Sketch.WriteTo and Rotator.WriteTo to io.Discard (a clock with Now near
// today, where WallMillis's value fits) are logged and bounded by what
// they were before 2483b3b (measured on 2483b3b^: sketch 1, rotator 8;
// WallMillis called alone allocates 2 (above): inlined in WriteTo its
// big.Ints stay on the stack; unchanged by 2483b3b).
func TestAudit153SnapshotWriteToAllocsNoWorse(t *testing.T) {
	clk := &a152Wall{time.Now().UnixMilli()}
	s, err := New(Config{Hi: 1e9, Levels: 2, CellsPerLevel: 64, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", 1)
	ns := testing.AllocsPerRun(20, func() {
		if _, err := s.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	r, err := NewRotator(RotatorConfig{Sketch: Config{Hi: 1e9, Levels: 2, CellsPerLevel: 64, Clock: clk}, Generations: 3, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 1)
	nr := testing.AllocsPerRun(20, func() {
		if _, err := r.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocs per WriteTo: sketch %v, rotator %v", ns, nr)
	if ns > a153SketchAllocs || nr > a153RotAllocs {
		t.Errorf("allocs per WriteTo: sketch %v (was %v), rotator %v (was %v)", ns, a153SketchAllocs, nr, a153RotAllocs)
	}
}

const a153SketchAllocs, a153RotAllocs = 1, 8
