package core

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

// a152Plain is a Clock with no Now (anchor time.Now(), with a monotonic
// reading, at an unknown fraction of its millisecond).
type a152Plain struct{ ms int64 }

func (c *a152Plain) NowMillis() int64 { return c.ms }

// a152Wall is a clock with Now whose reading is its Unix millisecond.
type a152Wall struct{ ms int64 }

func (c *a152Wall) NowMillis() int64 { return c.ms }
func (c *a152Wall) Now() time.Time   { return time.UnixMilli(c.ms) }

// a152Ns is t in ns since the Unix epoch, exact.
func a152Ns(t time.Time) *big.Int {
	v := big.NewInt(t.Unix())
	v.Mul(v, big.NewInt(1e9))
	return v.Add(v, big.NewInt(int64(t.Nanosecond())))
}

// a152Range spans the int64 ms range, ends and middle.
var a152Range = []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 1000, -1 << 62, -1e15,
	-(math.MaxInt64 / int64(time.Millisecond)) - 1, -1, 0, 1, math.MaxInt64 / int64(time.Millisecond),
	math.MaxInt64/int64(time.Millisecond) + 1, 1e15, 1 << 62, math.MaxInt64 - 1000, math.MaxInt64 - 1, math.MaxInt64}

// a152Anchors are the clocks' readings at NewTimebase.
var a152Anchors = []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}

// TestAudit152PlainClockWholeRangeExact: for a clock without Now at
// either end of int64 ms or in the middle, Time(ms) lies exactly
// (ms - anchorMs) ms after the anchor for every ms of the whole range
// (near and far paths, wrapped spans included), so Time is strictly
// increasing in ms, convert(Time(ms)) == ms, and Millis(Time(ms)) on a
// fresh Timebase is ms, or the clock's reading for a later ms.
func TestAudit152PlainClockWholeRangeExact(t *testing.T) {
	for _, anchor := range a152Anchors {
		tb := NewTimebase(&a152Plain{anchor})
		var prev time.Time
		for i, ms := range a152Range {
			tm := tb.Time(ms)
			want := new(big.Int).Sub(big.NewInt(ms), big.NewInt(anchor))
			want.Mul(want, big.NewInt(1e6))
			want.Add(want, a152Ns(tb.anchor))
			if got := a152Ns(tm); got.Cmp(want) != 0 {
				t.Errorf("plain clock at %d: Time(%d) = %v ns, want %v", anchor, ms, got, want)
			}
			if i > 0 && !prev.Before(tm) {
				t.Errorf("plain clock at %d: Time(%d) = %v not after Time(%d) = %v", anchor, ms, tm, a152Range[i-1], prev)
			}
			prev = tm
			if got := tb.convert(tm); got != ms {
				t.Errorf("plain clock at %d: convert(Time(%d)) = %d", anchor, ms, got)
			}
			fresh := NewTimebase(&a152Plain{anchor})
			if got := fresh.Millis(fresh.Time(ms)); got != min(ms, anchor) {
				t.Errorf("plain clock at %d: Millis(Time(%d)) = %d, want %d", anchor, ms, got, min(ms, anchor))
			}
		}
	}
}

// TestAudit152TimeOfMillisFloors: for clocks with Now at both ends and
// in the middle (and for clocks without Now within 292 years of the
// anchor: the far path is the finding below), and t at the anchor ± 1 ns, ± 1.5 ms, ±
// 292 years, ± 1000 years, the zero time and Unix(±2^62 s): where
// convert(t) is not saturated, Time(convert(t)) is t floored to the
// anchor's millisecond grid: at or before t, less than 1 ms before it.
func TestAudit152TimeOfMillisFloors(t *testing.T) {
	for _, anchor := range a152Anchors {
		for _, c := range []Clock{&a152Plain{anchor}, &a152Wall{anchor}} {
			tb := NewTimebase(c)
			ts := []time.Time{{}, time.Unix(1<<62, 0), time.Unix(-1<<62, 0)}
			for _, d := range []time.Duration{0, 1, -1, 1500 * time.Microsecond, -1500 * time.Microsecond, math.MaxInt64, math.MinInt64} {
				ts = append(ts, tb.anchor.Add(d))
			}
			for _, y := range []int{292, 293, 1000, -292, -293, -1000} {
				ts = append(ts, tb.anchor.AddDate(y, 0, 0), tb.anchor.Add(1).AddDate(y, 0, 0))
			}
			_, plain := c.(*a152Plain)
			for _, x := range ts {
				ms := tb.convert(x)
				if ms == math.MinInt64 || ms == math.MaxInt64 {
					continue
				}
				if d := x.Sub(tb.anchor); plain && (d == math.MaxInt64 || d == math.MinInt64) {
					continue // farMillis's Unix grid: TestAudit152FixedFarConvertIgnoresAnchorFraction
				}
				back := tb.Time(ms)
				gap := new(big.Int).Sub(a152Ns(x), a152Ns(back))
				if gap.Sign() < 0 || gap.Cmp(big.NewInt(1e6)) >= 0 {
					t.Errorf("%T at %d: t %v converts to %d, whose Time %v is %v ns before t, want [0, 1e6)", c, anchor, x, ms, back, gap)
				}
			}
		}
	}
}

// TestAudit152TimeMonotonicReadingAndSub: a plain clock's anchor
// (time.Now()) has a monotonic reading: Time keeps it on the near path
// (a few ms from the anchor) and drops it on the far path (farTime:
// time.Unix). A near time and a far time still subtract exactly on the
// wall clock (saturated at 292 years, as Merge's Time(msS).Sub(Time(msO))
// and limit's gap/WaitN arithmetic use them), and a near time from Time
// subtracts from another exactly (monotonic readings on both).
func TestAudit152TimeMonotonicReadingAndSub(t *testing.T) {
	tb := NewTimebase(&a152Plain{0})
	near, near2 := tb.Time(5), tb.Time(-7)
	if !strings.Contains(near.String(), "m=") {
		t.Errorf("Time(5) near the anchor has no monotonic reading: %v", near)
	}
	far := tb.Time(math.MaxInt64)
	if strings.Contains(far.String(), "m=") {
		t.Errorf("Time(MaxInt64) (far path) has a monotonic reading: %v", far)
	}
	if d := near.Sub(near2); d != 12*time.Millisecond {
		t.Errorf("Time(5).Sub(Time(-7)) = %v, want 12ms", d)
	}
	if d := far.Sub(near); d != math.MaxInt64 {
		t.Errorf("far.Sub(near) = %v, want the saturated MaxInt64", d)
	}
	// Two far-path times 10 ms apart (wrapped spans from an anchor at
	// MaxInt64) subtract exactly.
	tb2 := NewTimebase(&a152Plain{math.MaxInt64})
	f1, f2 := tb2.Time(math.MinInt64+10), tb2.Time(math.MinInt64)
	if d := f1.Sub(f2); d != 10*time.Millisecond {
		t.Errorf("two far times 10 ms apart: Sub = %v", d)
	}
	// Time(ms) for the same ms is Equal however it is reached.
	if a, b := tb.Time(0), tb.Time(0); !a.Equal(b) || a != b {
		t.Errorf("Time(0) twice: %v, %v", a, b)
	}
	if a, b := tb2.Time(math.MinInt64), tb2.Time(math.MinInt64); a != b {
		t.Errorf("far Time twice: %v, %v (== differs)", a, b)
	}
}

// TestAudit152FixedFarConvertIgnoresAnchorFraction (audit 152): for a
// clock without Now the anchor is time.Now(), inside its Unix
// millisecond (fraction f). convert's near path counts whole ms from the
// anchor (the anchor's grid), farTime too (it adds the anchor's
// nanoseconds), but farMillis (t more than 292 years from the anchor)
// floors t's and the anchor's Unix ms separately (the Unix grid). So:
//   - Time(convert(t)) lies after t, by up to 1 ms, for a far t (t
//     converts one ms late);
//   - convert is not monotone across the 292-year boundary: with f >=
//     0.775808 ms, t1 = anchor + MinInt64 ns (far path) converts to
//     -9223372036854, one ms after t2 = t1 + 1 ns (near path),
//     -9223372036855.
//
// internal/core/clock.go (anchorOf): the anchor is "the time.Time at
// which c's millisecond ms began ... so that convert maps a time.Time to
// the millisecond it falls in"; (Time) "the inverse of Millis for times
// that were not capped". The anchor's fraction is set here (f = 0,
// 0.5 ms, 0.9 ms) to make the run deterministic; time.Now() gives any f.
// Impact is small: through Millis the high-water mark hides the order
// break, and a far t counts at most 1 ms late (never early), only for a
// clock without Now read more than 292 years from its anchor; but Time
// (0038162's farTime, anchor grid) and convert (Unix grid) disagree there.
// Fix: clock.go:315 farMillis, count ns exactly from the anchor as
// farTime does: anchorMs + floor((t's Unix ns - a's Unix ns) / 1e6) on
// big.Int, saturated.
func TestAudit152FixedFarConvertIgnoresAnchorFraction(t *testing.T) {
	for _, f := range []int{0, 500_000, 900_000} {
		tb := NewTimebase(&a152Plain{0})
		tb.anchor = time.Unix(1_700_000_000, int64(f)) // a time.Now() at fraction f
		t1 := tb.anchor.Add(math.MinInt64)
		t2 := t1.Add(1)
		if m1, m2 := tb.convert(t1), tb.convert(t2); m1 > m2 {
			t.Errorf("anchor fraction %d ns: t1 %v before t2 %v converts later: %d > %d", f, t1, t2, m1, m2)
		}
		for _, x := range []time.Time{tb.anchor.AddDate(1000, 0, 0), tb.anchor.AddDate(-1000, 0, 0), {}} {
			ms := tb.convert(x)
			back := tb.Time(ms)
			if back.After(x) {
				t.Errorf("anchor fraction %d ns: t %v converts to %d, whose Time %v is after t (by %v ns)", f, x, ms, back, new(big.Int).Sub(a152Ns(back), a152Ns(x)))
			}
		}
	}
}
