package meter

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a109Cells returns the L cells of key in in's sketch.
func a109Cells(in *Inflight, key string) []float64 {
	_, levels := core.Detailed(in.s, []byte(key), func(_, _ uint32, score float64) float64 { return score })
	return levels
}

// TestAudit109FixedInflightClockJumpLeaks (audit 109; fixed at stop 61, the text below
// says what was wrong): Inflight's counts are
// conserved (inflight.go: "every +1 is matched by its -1"; a refused
// TryAcquire leaves nothing: NewInflight's "a refused TryAcquire whose
// commit met a conflict takes its +1 back out of every cell, so it leaks
// nothing"; docs/design.md, "Roll-backs", case 5: in a conserved sketch
// case 3's subtraction "replaces case 4 for any cell below Hi", "whatever
// the stamps"). Inflight's counts take no time, and its clock (WithClock)
// may jump: API.md, "Any idle time, 1 ms to years".
//
// The interleaving of TestTryAcquireRefusedLeaksNothing (all keys in one
// cell per level, T = TryAcquire(t, 3) on [2, 2] commits level 0, another
// key's Acquire raises both cells before T's level-1 CAS, T is refused
// on [4, 3]), with one change: that Acquire runs after the clock stepped
// forward 2^31 ms (24.9 days; a fake clock, or any Clock that jumps).
// rollback (internal/core/tryupdate.go) refuses every roll-back once the
// sketch's high water is 2^31 ms past the call's time, before the
// conserved rule is reached, so T's undo of level 0 keeps its +1 (held),
// T is refused and returns no Guard: after every Guard is released level
// 0 still counts one request, for good. The age test guards 32-bit
// stamps repeating, which a conserved subtraction does not read.
func TestAudit109FixedInflightClockJumpLeaks(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	in, err := NewInflight(0, WithSize(2, 1), WithClock(clk), WithSeed(109))
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := in.Acquire("a"), in.Acquire("b")
	var g3 *Guard
	fired := false
	core.SetHooks(in.s, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 && !fired {
			fired = true
			clk.Advance(time.Duration(1<<31) * time.Millisecond)
			g3 = in.Acquire("c")
		}
	}})
	g := in.TryAcquire("t", 3)
	core.SetHooks(in.s, core.Hooks{})
	if !fired || g3 == nil {
		t.Fatal("the interleaving did not happen: no Acquire ran before the level-1 CAS")
	}
	if g != nil {
		t.Fatal("TryAcquire(t, 3) admitted with 3 in flight in every cell after the conflict")
	}
	g1.Release()
	g2.Release()
	g3.Release()
	for l, v := range a109Cells(in, "t") {
		if v != 0 {
			t.Errorf("level %d counts %v after every Guard was released, want 0: the refused TryAcquire's +1 leaked (a clock jump of 2^31 ms during its commit)", l, v)
		}
	}
}
