package core

import (
	"math"
	"math/big"
	"testing"
	"time"
)

// a150Plain is a Clock with no Now: its Timebase's anchor is time.Now()
// at an anchorMs that is the clock's own reading.
type a150Plain struct{ ms int64 }

func (c *a150Plain) NowMillis() int64 { return c.ms }

// a150Wall is a clock with Now whose reading is its Unix millisecond.
type a150Wall struct{ ms int64 }

func (c *a150Wall) NowMillis() int64 { return c.ms }
func (c *a150Wall) Now() time.Time   { return time.UnixMilli(c.ms) }

// a150UnixMs is t's Unix millisecond (floored), exact.
func a150UnixMs(t time.Time) *big.Int {
	v := big.NewInt(t.Unix())
	v.Mul(v, big.NewInt(1000))
	return v.Add(v, big.NewInt(int64(t.Nanosecond()/1e6)))
}

// TestAudit150FixedConvertNearAnchorWraps (audit 150): fed71ea made
// convert's far path (a span over 292 years) saturate the reading, but
// the near path still returns tb.anchorMs + ms unsaturated. A clock (with
// Now or without) whose reading is MaxInt64-5 ms converts a t 10 ms after
// its anchor to MinInt64+4, and Millis, before any reading raised the
// high-water mark, returns that: a time 10 ms in the future reads 2^64 ms
// in the past, instead of being capped at the clock's reading.
//
// internal/core/clock.go (Timebase doc): "A t later than the clock's
// current reading counts as the current reading"; fed71ea's message:
// "spans over int64 ms no longer wrap: Timebase.convert saturates the
// reading". Observed: Millis(anchor+10ms) = -9223372036854775804. The
// mirror: a clock at MinInt64+5 converts anchor-10ms to MaxInt64-4
// (capped at the reading, not the high-water mark). Fix: clock.go:309,
// return addSat(tb.anchorMs, ms).
func TestAudit150FixedConvertNearAnchorWraps(t *testing.T) {
	for _, c := range []Clock{&a150Plain{math.MaxInt64 - 5}, &a150Wall{math.MaxInt64 - 5}} {
		tb := NewTimebase(c)
		if got := tb.convert(tb.anchor.Add(10 * time.Millisecond)); got != math.MaxInt64 {
			t.Errorf("%T at MaxInt64-5: convert(anchor+10ms) = %d, want MaxInt64 (saturated)", c, got)
		}
		if got := tb.Millis(tb.anchor.Add(10 * time.Millisecond)); got != math.MaxInt64-5 {
			t.Errorf("%T at MaxInt64-5: Millis(anchor+10ms) = %d, want the clock's reading %d", c, got, int64(math.MaxInt64-5))
		}
	}
	for _, c := range []Clock{&a150Plain{math.MinInt64 + 5}, &a150Wall{math.MinInt64 + 5}} {
		tb := NewTimebase(c)
		if got := tb.convert(tb.anchor.Add(-10 * time.Millisecond)); got != math.MinInt64 {
			t.Errorf("%T at MinInt64+5: convert(anchor-10ms) = %d, want MinInt64 (saturated)", c, got)
		}
	}
}

// TestAudit150FixedTimeWrapsForPlainClock (audit 150): Time's new
// wrapped-span path returns time.UnixMilli(anchor.UnixMilli() + d), "right
// modulo 2^64". That holds only when anchorMs is the anchor's Unix ms (a
// clock with Now). A clock without Now reading MaxInt64 has its anchor at
// time.Now() (Unix ms about 1.8e12): Time(MinInt64), a reading 2^64-1 ms
// before the anchor (about 584 million years before it, a time.Time
// holds it), comes back as anchor + 1 ms, a time after the clock's
// current reading.
//
// clock.go: "Time returns the time.Time of reading ms (the inverse of
// Millis for times that were not capped)". Observed: Time(MinInt64) is
// after Time(MaxInt64). (Millis(Time(MinInt64)) still gives MinInt64, but
// only because convert's near path wraps too: the finding above.) Fix:
// clock.go:362-367, compute anchor's Unix ms + d exactly (big.Int or
// 128-bit) and build the time with time.Unix(sec, nsec), which holds
// every such instant.
func TestAudit150FixedTimeWrapsForPlainClock(t *testing.T) {
	tb := NewTimebase(&a150Plain{math.MaxInt64})
	lo, hi := tb.Time(math.MinInt64), tb.Time(math.MaxInt64)
	if !lo.Before(hi) {
		want := new(big.Int).Sub(a150UnixMs(tb.anchor), new(big.Int).Sub(big.NewInt(math.MaxInt64), big.NewInt(math.MinInt64)))
		t.Errorf("clock without Now at MaxInt64: Time(MinInt64) = %v (Unix ms %v), not before Time(MaxInt64) = %v; want Unix ms %v", lo, a150UnixMs(lo), hi, want)
	}
	tb = NewTimebase(&a150Plain{math.MinInt64})
	lo, hi = tb.Time(math.MinInt64), tb.Time(math.MaxInt64)
	if !lo.Before(hi) {
		t.Errorf("clock without Now at MinInt64: Time(MaxInt64) = %v, not after Time(MinInt64) = %v", hi, lo)
	}
}

// TestAudit150FarMillisExact: farMillis against an exact big.Int sum (of
// the floored difference, since audit 152) for
// anchors at both ends and t at the zero time.Time, Unix(±2^62 s),
// Unix(±MaxInt64/1000 s) and instants with fractions; saturated outside
// int64.
func TestAudit150FarMillisExact(t *testing.T) {
	times := []time.Time{
		{}, time.Unix(1<<62, 0), time.Unix(-1<<62, 0), time.Unix(math.MaxInt64/1000, 999_999_999),
		time.Unix(math.MinInt64/1000, 0), time.UnixMilli(math.MaxInt64), time.UnixMilli(math.MinInt64),
		time.Unix(0, 0), time.Unix(-1, 1), time.Unix(1e12, 5e8), time.Unix(-1e12, 999_999_999),
	}
	anchors := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	for _, a := range times {
		for _, tt := range times {
			for _, am := range anchors {
				// Since audit 152: whole ms of the exact difference, as
				// convert's near path counts (the anchor's fraction of a
				// millisecond counts), not the difference of floors.
				v := a150UnixNs(tt)
				v.Sub(v, a150UnixNs(a))
				v.Div(v, big.NewInt(1e6)) // Euclidean: the floor
				v.Add(v, big.NewInt(am))
				want := v
				switch {
				case v.Cmp(big.NewInt(math.MaxInt64)) > 0:
					want = big.NewInt(math.MaxInt64)
				case v.Cmp(big.NewInt(math.MinInt64)) < 0:
					want = big.NewInt(math.MinInt64)
				}
				if got := farMillis(am, tt, a); got != want.Int64() {
					t.Errorf("farMillis(%d, %v, %v) = %d, want %v", am, tt, a, got, want)
				}
			}
		}
	}
}

// TestAudit150WallClockTimeRoundTrips: for a clock with Now (anchorMs is
// the anchor's Unix ms) at either end of int64 ms or in the middle,
// Time(ms) is time.UnixMilli(ms) and convert(Time(ms)) == ms for ms
// across the whole int64 range; Millis(Time(ms)) is ms for every ms up to
// the reading, the reading for any later one.
func TestAudit150WallClockTimeRoundTrips(t *testing.T) {
	mss := []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 1<<31, -1 << 62, -1e15, -1, 0, 1,
		1e15, 1 << 62, math.MaxInt64 - 1<<31, math.MaxInt64 - 1, math.MaxInt64}
	for _, anchor := range mss {
		for _, ms := range mss {
			tb := NewTimebase(&a150Wall{anchor})
			tm := tb.Time(ms)
			if !tm.Equal(time.UnixMilli(ms)) {
				t.Errorf("anchor %d: Time(%d) = %v, want %v", anchor, ms, tm, time.UnixMilli(ms))
			}
			if got := tb.convert(tm); got != ms {
				t.Errorf("anchor %d: convert(Time(%d)) = %d", anchor, ms, got)
			}
			want := min(ms, anchor)
			if got := tb.Millis(tm); got != want {
				t.Errorf("anchor %d: Millis(Time(%d)) = %d, want %d", anchor, ms, got, want)
			}
		}
	}
}

// TestAudit150PlainClockRoundTripsWithin292Years: for a clock with no Now
// at any reading, Time and Millis round trip for every ms within 292
// years of the reading (the span where no int64 wraps).
func TestAudit150PlainClockRoundTripsWithin292Years(t *testing.T) {
	const far = math.MaxInt64 / int64(time.Millisecond)
	for _, anchor := range []int64{math.MinInt64 + far, -1 << 62, 0, 1 << 62, math.MaxInt64 - far} {
		tb := NewTimebase(&a150Plain{anchor})
		for _, d := range []int64{-far, -far + 1, -1, 0, 1, far - 1, far} {
			ms := anchor + d
			if got := tb.convert(tb.Time(ms)); got != ms {
				t.Errorf("anchor %d: convert(Time(%d)) = %d", anchor, ms, got)
			}
		}
	}
}

// a150UnixNs is x's Unix nanosecond, exactly.
func a150UnixNs(x time.Time) *big.Int {
	v := big.NewInt(x.Unix())
	v.Mul(v, big.NewInt(1e9))
	return v.Add(v, big.NewInt(int64(x.Nanosecond())))
}
