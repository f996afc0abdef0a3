package core

import (
	"sync/atomic"
	"testing"
	"time"
)

// a55StepClock is a clock in the shape of the root package's adapter
// (NowMillis is Now().UnixMilli(), a second read of Now) whose Now
// advances by step at every call, as a real clock does between two reads
// (here deterministically).
type a55StepClock struct {
	ns   atomic.Int64
	step int64
}

func (c *a55StepClock) Now() time.Time   { return time.Unix(0, c.ns.Add(c.step)-c.step) }
func (c *a55StepClock) NowMillis() int64 { return c.Now().UnixMilli() }

// TestAudit55FixedAnchorEarlyOnAdvancingClock (fixed: a clock that moves on every read is anchored at its Now alone): the root package's
// adapter over a clock that advances between its two reads. NowMillis is
// Now().UnixMilli() by construction (the scales are the same), yet when
// each of anchorOf's 4 pairs straddles a millisecond (here every pair:
// the clock advances 0.5 ms a read and starts at a fraction >= 0.5) the
// anchor keeps its fraction and stands for the millisecond after the one
// it falls in: a time.Time in the anchor's own millisecond, after the
// anchor, converts one millisecond early. internal/core/clock.go
// (anchorOf): "so that convert maps a time.Time to the millisecond it
// falls in"; commit abd55ce: "a time.Time converts to the millisecond it
// falls in".
func TestAudit55FixedAnchorEarlyOnAdvancingClock(t *testing.T) {
	c := &a55StepClock{step: 500_000}
	c.ns.Store(1_700_000_000_000*1e6 + 600_000) // x.6 ms
	tb := NewTimebase(c)
	bad := 0
	var first string
	for f := int64(0); f < 20_000_000; f += 100_000 {
		tt := time.Unix(0, tb.anchor.UnixNano()+f)
		got, want := tb.convert(tt), tt.UnixMilli()
		if got != want {
			bad++
			if first == "" {
				first = tt.Format("15:04:05.0000000") + ": got " + time.UnixMilli(got).Format("05.000") + " want " + time.UnixMilli(want).Format("05.000")
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 200 instants (0.1 ms apart, from the anchor on) convert to a millisecond other than the one they fall in "+
			"(the clock's scale is Unix ms: NowMillis == Now().UnixMilli()); first: %s; anchor %v stands for %d",
			bad, first, tb.anchor.Format("05.0000000"), tb.anchorMs)
	}
}

// TestAudit55AnchorFakeFractions: a timeClock read at every fraction (0,
// 1 ns, 0.5 ms, 999999 ns) converts every instant 1 ns..3 ms around it to
// its own Unix ms, and Time(ms) round-trips.
func TestAudit55AnchorFakeFractions(t *testing.T) {
	for _, frac := range []int64{0, 1, 499_999, 500_000, 999_999} {
		for _, base := range []int64{1_700_000_000_000, -5, 0} {
			c := &a55StepClock{step: 0}
			c.ns.Store(base*1e6 + frac)
			tb := NewTimebase(c)
			for d := int64(-3e6); d <= 3e6; d += 999 {
				tt := time.Unix(0, base*1e6+frac+d)
				if got, want := tb.convert(tt), tt.UnixMilli(); got != want {
					t.Fatalf("frac %d base %d d %d: convert %d, want %d", frac, base, d, got, want)
				}
			}
			for ms := base - 1000; ms <= base+1000; ms += 7 {
				if got := tb.convert(tb.Time(ms)); got != ms {
					t.Fatalf("Time(%d) round-trips to %d", ms, got)
				}
				if tb.Time(ms).UnixMilli() != ms {
					t.Fatalf("Time(%d).UnixMilli() = %d", ms, tb.Time(ms).UnixMilli())
				}
			}
		}
	}
}

// TestAudit55AnchorDefaultNeverEarly: the default clock's anchor: a
// time.Now() taken after the Timebase converts to at least the
// millisecond the clock read before it (never early).
func TestAudit55AnchorDefaultNeverEarly(t *testing.T) {
	for range 200 {
		tb := NewTimebase(systemClock{})
		for range 200 {
			before := systemMillis()
			now2 := time.Now()
			if got := tb.convert(now2); got < before {
				t.Fatalf("time.Now() converted to %d, before a clock read of %d made earlier", got, before)
			}
		}
	}
}
