package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87LmCancelCellAtClampKeepsTake: Cancel's doc
// (limit/reserve.go): "A reservation that filled the key to MaxDebt is
// never given back (either engine), nor, on the count-min, is the part
// in a cell it left at the clamp (MaxDebt) because other keys share that
// cell (a clamp may have cut their debits too, so the cell cannot tell
// the reservation's part from theirs)"; and otherwise "any other cell
// keeps the debit, on the safe side (a key is never given back more than
// its own reservation, nor anything of another key's ...)". A count-min of 2 x 2 cells, MaxDebt 4
// (burst 2, RejectCost 1): k's cell s, shared with p, holds 3 (p's burst
// and its RejectCost); k's other cell holds 0, so k reads no debt and is
// far from MaxDebt itself. k reserves 1 token (s goes to 4, the clamp,
// reached through p) and cancels at once, nothing else written between.
// s keeps k's token (the roll-back never takes an increment out of a
// cell stored at Hi: internal/core, rollback), on the safe side: p, whose
// other cell is at 4 through a third key y, may read up to that token
// more debt (4, had 3), never less; and k is never admitted more than
// before the reservation. (Audit 87 found Cancel's doc then promised the
// cell's previous value back, since no other request wrote it; the doc
// now lists a cell the take left at the clamp among the exceptions.)
func TestAudit87LmCancelCellAtClampKeepsTake(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	fc.Set(1 << 30)
	mk := func() *limit.Limiter {
		return limit.MustNew(1, 2, limit.WithEngine(limit.CountMin), limit.WithSize(2, 2), limit.WithRejectCost(1),
			limit.WithSeed(7), limit.WithClock(fc), limit.WithName("cm"))
	}
	reps := audit87LmClasses(t, mk)
	k, y, p := audit87LmSplitClasses(t, mk, reps)
	cm := mk()
	now := fc.Now()
	for _, key := range []string{p, y} {
		if !cm.AllowN(now, key, 2) || cm.AllowN(now, key, 1) {
			t.Fatalf("setup: %s's burst and its denial", key)
		}
	}
	if got := cm.TokensAt(now, k); got != 2 {
		t.Fatalf("setup: k reads %v tokens; want 2", got)
	}
	before := cm.TokensAt(now, p)
	kBefore := cm.TokensAt(now, k)
	peek := cm.PeekN(now, k, 1)
	const take = 1.0 // the reservation's cost, in tokens
	r := cm.ReserveN(now, k, int(take))
	if !r.OK() {
		t.Fatal("setup: k's reservation refused")
	}
	if got := cm.TokensAt(now, p); got != before-take {
		t.Fatalf("setup: p reads %v tokens with k's reservation held; want %v (s at the clamp)", got, before-take)
	}
	r.Cancel()
	if got := cm.TokensAt(now, k); got > kBefore || got < kBefore-take {
		t.Errorf("k reads %v tokens after Cancel, had %v; want %v to %v (never more than before, less at most the take)", got, kBefore, kBefore-take, kBefore)
	}
	if got := cm.TokensAt(now, p); got > before || got < before-take {
		t.Errorf("after k's ReserveN(1) and Cancel, with no write between, p reads %v tokens, had %v; want %v to %v "+
			"(a cell the take left at the clamp keeps it, on the safe side: p loses at most the take, never gains)", got, before, before-take, before)
	}
	// k is never admitted more than before: a peek of one token finds
	// no more Remaining than before the reservation.
	if got := cm.PeekN(now, k, 1); !got.Allowed || got.Remaining > peek.Remaining {
		t.Errorf("k's peek after Cancel: %+v; want admitted with Remaining at most %d, as before", got, peek.Remaining)
	}
}
