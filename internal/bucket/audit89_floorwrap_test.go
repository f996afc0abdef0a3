package bucket

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a89bkWrap returns the milliseconds after which the floor histogram's
// 32-bit bucket epochs (stamp / width, kept mod 2^32) repeat: the most
// whole ms within 2^32 x width ticks (a reader's threshold then lands
// less than a millisecond's ticks below the same 32-bit epoch, inside
// the 256 buckets the reader counts).
func a89bkWrap(e *Engine) int64 {
	gn := e.q.gn
	ticks := uint64(1) << 32 * e.floors.width
	return int64(ticks / gn)
}

// a89bkFlood puts keys keys at Max at the clock's reading: on a 2-line
// engine (28 slots) every line gets an eviction floor at Max.
func a89bkFlood(e *Engine, tag string, keys int) {
	for i := range keys {
		e.Update(fmt.Sprintf("%s-%d", tag, i), e.q.max)
	}
}

// TestAudit89BucketsFixedFloorHistWrapReadsPhantomFloors: Saturation's
// floor histogram keeps each bucket's epoch (stamp / width) in 32 bits,
// so 2^32 epochs after a burst of evictions a reader's threshold falls in
// the same 32-bit epoch as the burst's long-expired floors, and they are
// counted as live: an engine in which nothing has been written for years,
// and which denies no fresh key, reads Saturation 1.
//
// Promise: Saturation is "the estimated probability that a fresh key
// (one the engine has never seen) asking for n now under limit is
// denied" (saturation.go), and floorHist's doc: "a bucket whose epoch is
// in the past is ignored by readers" (floors.go). limit.New(10, 20)'s
// law (15 ticks a ms, width 469) wraps after 134,289,310,788 ms (4.26
// years); the law of a limiter at 16 ticks a ms or more (New(1e6, 1000):
// 16,000 ticks a ms) after 18.7 hours.
func TestAudit89BucketsFixedFloorHistWrapReadsPhantomFloors(t *testing.T) {
	for _, c := range []struct {
		name string
		law  Law
	}{
		{"limit.New(10,20)", Linear(10, 40)},
		{"limit.New(1e6,1000)", Linear(1e6, 2000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, c.law, clk)
			if e.q.gd != 1 || e.q.gn == 0 {
				t.Fatalf("quantum: gn %d gd %d; want whole ticks per ms", e.q.gn, e.q.gd)
			}
			wrap := a89bkWrap(e)
			t.Logf("%d ticks/ms, span %d, width %d: epochs wrap after %d ms (%.1f h)", e.q.gn, e.q.span, e.floors.width, wrap, float64(wrap)/3.6e6)
			if c.name == "limit.New(10,20)" && (e.q.gn != 15 || e.q.span != 60000 || e.floors.width != 469 || wrap != 134_289_310_788) {
				t.Fatalf("quantum changed: gn %d span %d width %d wrap %d (the limit-level test hard-codes 15, 60000, 469, 134289310788)", e.q.gn, e.q.span, e.floors.width, wrap)
			}
			a89bkFlood(e, "heavy", 200)
			if s := e.Saturation(1, e.q.max); s < 0.99 {
				t.Fatalf("after the flood: Saturation %v; want about 1 (both lines floored)", s)
			}
			// Control: half-way to the wrap, every debt long drained.
			clk.Advance(time.Duration(wrap/2) * time.Millisecond)
			if s := e.Saturation(1, e.q.max); s > 0.01 {
				t.Fatalf("half-way to the wrap: Saturation %v; want 0", s)
			}
			clk.Advance(time.Duration(wrap-wrap/2) * time.Millisecond)
			for i := range 200 {
				if got := e.Query(fmt.Sprintf("fresh-%d", i)); got != 0 {
					t.Fatalf("fresh key %d reads %v; want 0 (nothing written for years)", i, got)
				}
			}
			if s := e.Saturation(1, e.q.max); s > 0.01 {
				t.Errorf("2^32 histogram epochs after the flood (%d ms), nothing live: Saturation %v; want 0 (floors from then counted as live)", wrap, s)
			}
		})
	}
}

// TestAudit89BucketsFixedFloorHistDropsFloorsAfterHalfWrap: the floor
// histogram compares a new floor's 32-bit epoch with its bucket's as
// int32(ep-xe) < 0 ("the bucket moved on: that floor has expired"). Once
// an engine's time passes 2^31 epochs (stamp / width), a floor landing in
// a bucket that was never written (epoch 0), or last written more than
// 2^31 epochs before, compares as older and is not counted. An engine
// that first saturates after that uptime has every line floored, denies
// every fresh key, and reads Saturation at the fingerprint rate alone.
// limit.New(1e6, 1000)'s law reaches 2^31 epochs after 9.4 hours,
// New(1000, 1000)'s after 1.06 years, New(10, 20)'s after 2.13 years.
//
// Promise: Saturation is "the estimated probability that a fresh key
// (one the engine has never seen) asking for n now under limit is
// denied" (saturation.go); floorHist's above: "the count is exact but
// for floors within one bucket ... above theta, which it may count too:
// the reading errs high, as an alert should" (floors.go).
func TestAudit89BucketsFixedFloorHistDropsFloorsAfterHalfWrap(t *testing.T) {
	for _, c := range []struct {
		name string
		law  Law
	}{
		{"limit.New(10,20)", Linear(10, 40)},
		{"limit.New(1e6,1000)", Linear(1e6, 2000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, c.law, clk)
			half := a89bkWrap(e)/2 + a89bkWrap(e)/32 // past 2^31 epochs by 2^27
			// Control: the same flood at the start reads full.
			ctl := newTest(t, 2, c.law, nil)
			a89bkFlood(ctl, "heavy", 200)
			if s := ctl.Saturation(1, ctl.q.max); s < 0.99 {
				t.Fatalf("control: after a flood at start: Saturation %v; want about 1", s)
			}
			clk.Advance(time.Duration(half) * time.Millisecond)
			a89bkFlood(e, "heavy", 200)
			denied := 0
			for i := range 200 {
				if e.Query(fmt.Sprintf("fresh-%d", i)) > 0 {
					denied++
				}
			}
			if denied != 200 {
				t.Fatalf("%d of 200 fresh keys read a debt; want all (both lines floored at Max)", denied)
			}
			if s := e.Saturation(1, e.q.max); s < 0.99 {
				t.Errorf("flood after %d ms of uptime (past 2^31 histogram epochs): every fresh key denied, Saturation %v; want about 1", half, s)
			}
		})
	}
}
