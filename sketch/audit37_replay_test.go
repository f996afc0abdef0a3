package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37ReplayReadOnlyAdmissionAtLo: a TryUpdate(A, -5, 0) whose
// cells sit at Lo = -10 changes nothing (a read-only admission). It is
// held in its validation, before the load of level 1, while B's
// Update(+3) lifts both cells to -7. The validation must see it and
// decide again: A is admitted and the cells end at Lo (-7 - 5 clamped),
// as B-then-A would leave them. Had A returned on its stale snapshot, its
// -5 would be lost (cells at -7).
func TestAudit37ReplayReadOnlyAdmissionAtLo(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Lo: -10, Hi: 100, Clock: sketchtest.NewFakeClock()})
	keys := keysOnDistinctStripes(t, s, 2)
	a, b := keys[0], keys[1]
	s.Update(b, -50) // both cells to Lo
	hold := newHoldPoint(1, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{Skip: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(a, -5, 0) }()
	hold.wait(t, "A's validation of level 1")
	s.Update(b, 3) // -10 -> -7 on both levels
	close(hold.release)
	if !<-done {
		t.Fatal("A denied: -7 - 5 <= 0")
	}
	core.SetHooks(core.SketchOf(s), core.Hooks{})
	d := s.QueryDetailed(a)
	for _, l := range d.Levels {
		if l.Score != -10 {
			t.Errorf("level %d = %v, want -10 (B's +3 then A's -5, clamped at Lo): A's read-only admission validated a stale snapshot", l.Level, l.Score)
		}
	}
}

// TestAudit37ReplayCommitCheckAtHiNegative: M=2; A's level 0 shares
// B's cell, which B filled to Hi = 100, and A's level 1 holds 20 (A's own
// Update of 20, cut entirely at level 0). A's TryUpdate(A, 4, 200) has
// nothing to write at level 0 (pinned at Hi: a check) and 20 -> 24 at
// level 1. A is held before that check while B's Update(-30) lowers B's
// cells to 70. The check must fail, A undo nothing and decide again on
// (70, 20): admitted, A's cells (74, 24) and B's (74, 70). Without the
// check A would commit level 1 alone and level 0 would stay at 70.
func TestAudit37ReplayCommitCheckAtHiNegative(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 2, Lo: 0, Hi: 100, Clock: sketchtest.NewFakeClock()})
	idx := func(k []byte) [2]uint32 {
		d := s.QueryDetailed(k)
		return [2]uint32{d.Levels[0].Index, d.Levels[1].Index}
	}
	keys := keysOnDistinctStripes(t, s, 64)
	var a, b []byte
	for _, x := range keys {
		for _, y := range keys {
			ix, iy := idx(x), idx(y)
			if a == nil && ix[0] == iy[0] && ix[1] != iy[1] {
				a, b = x, y
			}
		}
	}
	if a == nil {
		t.Fatal("no pair of keys sharing level 0 only")
	}
	s.Update(b, 200) // B's cells at Hi
	s.Update(a, 20)  // level 0 cut entirely (stays 100), level 1 20
	hold := newHoldPoint(0, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{Skip: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(a, 4, 200) }()
	hold.wait(t, "A's check of level 0")
	s.Update(b, -30) // B's cells 100 -> 70
	close(hold.release)
	if !<-done {
		t.Fatal("A denied at 20 + 4 <= 200")
	}
	core.SetHooks(core.SketchOf(s), core.Hooks{})
	da, db := s.QueryDetailed(a), s.QueryDetailed(b)
	if da.Levels[0].Score != 74 || da.Levels[1].Score != 24 || db.Levels[1].Score != 70 {
		t.Fatalf("A's cells (%v, %v), B's level 1 %v; want (74, 24) and 70: the commit's check of a pinned level missed B's write", da.Levels[0].Score, da.Levels[1].Score, db.Levels[1].Score)
	}
}
