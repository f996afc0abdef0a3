package core_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Rotator.Rotate's godoc: it retires the primary now, whatever the
// deadline, and "the next deadline is one Period from now" (not one
// Period after the deadline it replaced); it may be called on any
// rotator, a lazy one included.
func TestAudit14MutRotateNextDeadlineFromNow(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	const P = 10 * time.Second
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch: core.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.None(), Hi: 100, Seed: 3, Clock: clk},
		Period: P,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Generations G0, G1 built at 0; deadline at 10 s.
	clk.Advance(6 * time.Second)
	r.UpdateString("k", 1) // in G0 and G1
	clk.Advance(time.Second)
	r.Rotate() // at 7 s: G1 (holds k) is primary, G2 (built now) is empty
	if got := r.QueryString("k"); got != 1 {
		t.Fatalf("right after Rotate: k reads %v, want 1 (G1 holds it)", got)
	}
	clk.Advance(P - time.Millisecond) // 16.999 s: before the new deadline
	if got := r.QueryString("k"); got != 1 {
		t.Fatalf("1 ms before Rotate's time + Period: k reads %v, want 1", got)
	}
	clk.Advance(time.Millisecond) // 17 s: one Period after Rotate
	if got := r.QueryString("k"); got != 0 {
		t.Errorf("one Period after Rotate: k reads %v, want 0 (G2, built at Rotate, is primary)", got)
	}
	if s := r.Stats(); s.Promotions != 2 {
		t.Errorf("Promotions %d, want 2 (Rotate and the deadline one Period after it)", s.Promotions)
	}
}

// Rotator.TryUpdate's godoc: "a call that finds the primary retired
// decides again on the new set". A promotion (here Rotate, run from the
// primary's Load hook: after the call read its stripe, before it holds
// it) closes the primary under the call; the call must then be admitted
// by the new primary, not denied, and the new primary must hold it.
func TestAudit14MutTryUpdateRetiredPrimaryDecidesAgain(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r, err := core.NewRotator(core.RotatorConfig{
			Sketch:   core.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.None(), Hi: 100, Seed: 5, Clock: clk},
			Period:   time.Hour,
			Prefetch: prefetch,
		})
		if err != nil {
			t.Fatal(err)
		}
		old := r.Current().Gens[0]
		rotated := 0
		core.SetHooks(old, core.Hooks{Load: func(uint32) {
			if rotated == 0 {
				rotated++
				r.Rotate()
			}
		}})
		if !r.TryUpdateString("k", 1, 10) {
			t.Errorf("prefetch %v: TryUpdate across a promotion was denied (0 + 1 <= 10); want it decided again and admitted", prefetch)
		}
		if rotated != 1 || r.Current().Gens[0] == old {
			t.Fatalf("prefetch %v: the hook did not rotate", prefetch)
		}
		if got := r.QueryString("k"); got != 1 {
			t.Errorf("prefetch %v: the new primary holds %v, want 1", prefetch, got)
		}
	}
}
