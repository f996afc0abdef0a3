package sketch_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// No write when nothing changes (docs/design.md, "No write when nothing
// changes"): an Update or admitted TryUpdate whose new word equals the
// word it loaded stores nothing. These tests count the writes through
// the sketch's hooks (a skipped level calls Skip; a commit calls
// BeforeCAS before each level's CAS or check; the stripe's seq grows by 2
// per commit) and replay the interleavings that the checks of a skipped
// level exist for.

// nwCounters counts the hooks' calls.
type nwCounters struct{ skip, beforeCAS, conflict, load atomic.Int32 }

func (c *nwCounters) hooks() core.Hooks {
	return core.Hooks{
		Skip:      func(uint32) { c.skip.Add(1) },
		BeforeCAS: func(uint32) { c.beforeCAS.Add(1) },
		Conflict:  func(uint32) { c.conflict.Add(1) },
		Load:      func(uint32) { c.load.Add(1) },
	}
}

func (c *nwCounters) reset() {
	c.skip.Store(0)
	c.beforeCAS.Store(0)
	c.conflict.Store(0)
	c.load.Store(0)
}

// nwScores returns the key's per-level scores.
func nwScores(s *sketch.Sketch, k []byte) []float64 {
	var v []float64
	for _, l := range s.QueryDetailed(k).Levels {
		v = append(v, l.Score)
	}
	return v
}

// TestNoWriteWhenNothingChanges: on a key pinned at Hi (or Lo) at the
// current millisecond, or with a zero delta, every write form skips
// every level and leaves the scores and the stripe as they were; one
// millisecond later the same call writes (the stamp moves), so the skip
// is exactly "the word would not change".
func TestNoWriteWhenNothingChanges(t *testing.T) {
	const levels = 4
	type op struct {
		name string
		pin  float64 // Update(k, pin) first: Hi, Lo, or an ordinary score
		// do is the call under test; its error says what went wrong at
		// the same millisecond (a denial, a refund that kept a level).
		do  func(s *sketch.Sketch, t time.Time, k []byte) error
		try bool // an admitted TryUpdate: no commit when it skips
	}
	ok := func(b bool, what string) error {
		if !b {
			return fmt.Errorf("%s", what)
		}
		return nil
	}
	ops := []op{
		{"Update at Hi", 100, func(s *sketch.Sketch, _ time.Time, k []byte) error { s.Update(k, 5); return nil }, false},
		{"UpdateAt at Hi", 100, func(s *sketch.Sketch, t time.Time, k []byte) error { s.UpdateAt(t, string(k), 5); return nil }, false},
		{"UpdateAndQuery at Hi", 100, func(s *sketch.Sketch, _ time.Time, k []byte) error {
			v := s.UpdateAndQuery(k, 5)
			return ok(v == 100, fmt.Sprintf("UpdateAndQuery = %v, want 100", v))
		}, false},
		{"AddAt at Hi", 100, func(s *sketch.Sketch, t time.Time, k []byte) error {
			rc := core.SketchOf(s).AddAt(t, k, 5)
			return ok(core.SketchOf(s).Refund(&rc), "Refund of a skipped add kept a level")
		}, false},
		{"TryUpdate admitted at Hi", 100, func(s *sketch.Sketch, _ time.Time, k []byte) error {
			return ok(s.TryUpdate(k, 5, 1000), "TryUpdate(k, 5, 1000) denied at 100")
		}, true},
		{"TryReserveAt admitted at Hi", 100, func(s *sketch.Sketch, t time.Time, k []byte) error {
			rc, adm := core.SketchOf(s).TryReserveAt(t, k, 5, 1000)
			return ok(adm && core.SketchOf(s).Refund(&rc), "TryReserveAt at 100 denied, or its refund kept a level")
		}, true},
		{"Update at Lo", -100, func(s *sketch.Sketch, _ time.Time, k []byte) error { s.Update(k, -5); return nil }, false},
		{"TryUpdate admitted at Lo", -100, func(s *sketch.Sketch, _ time.Time, k []byte) error {
			return ok(s.TryUpdate(k, -5, 0), "TryUpdate(k, -5, 0) denied at -100")
		}, true},
		{"Update of 0", 7, func(s *sketch.Sketch, _ time.Time, k []byte) error { s.Update(k, 0); return nil }, false},
		{"TryUpdate of 0", 7, func(s *sketch.Sketch, _ time.Time, k []byte) error {
			return ok(s.TryUpdate(k, 0, 10), "TryUpdate(k, 0, 10) denied at 7")
		}, true},
	}
	for _, tc := range ops {
		t.Run(tc.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			s := mustNewSketch(t, sketch.Config{Levels: levels, CellsPerLevel: 64, Lo: -100, Hi: 100, Decay: decay.Exponential(1), Clock: clk})
			k := []byte("pinned")
			s.Update(k, tc.pin)
			var c nwCounters
			core.SetHooks(core.SketchOf(s), c.hooks())
			before, seq := nwScores(s, k), core.StripeSeq(core.SketchOf(s), k)

			if err := tc.do(s, clk.Now(), k); err != nil {
				t.Error(err)
			}
			if got := c.skip.Load(); got != levels {
				t.Errorf("same millisecond: %d levels skipped, want %d", got, levels)
			}
			if got := c.beforeCAS.Load(); got != 0 {
				t.Errorf("same millisecond: %d commit steps, want none (no stripe taken)", got)
			}
			if got := core.StripeSeq(core.SketchOf(s), k); got != seq {
				t.Errorf("same millisecond: stripe seq %d -> %d, want unchanged", seq, got)
			}
			if got := nwScores(s, k); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Errorf("same millisecond: scores %v -> %v, want unchanged", before, got)
			}

			// One millisecond later the word's stamp moves: a write.
			clk.Advance(time.Millisecond)
			c.reset()
			_ = tc.do(s, clk.Now(), k) // a refund at Hi keeps the level now: the stamp moved

			if got := c.skip.Load(); got != 0 {
				t.Errorf("next millisecond: %d levels skipped, want 0 (the stamp moves)", got)
			}
			if tc.try {
				if got := c.beforeCAS.Load(); got != levels {
					t.Errorf("next millisecond: %d commit steps, want %d", got, levels)
				}
				if got := core.StripeSeq(core.SketchOf(s), k); got != seq+2 {
					t.Errorf("next millisecond: stripe seq %d -> %d, want one commit", seq, got)
				}
			}
		})
	}
}

// nwKeys returns two keys of s (L=2) on distinct stripes: x, and b, which
// shares x's level-0 cell and not its level-1 cell.
func nwKeys(t *testing.T, s *sketch.Sketch) (x, b []byte) {
	t.Helper()
	x = []byte("x")
	dx := s.QueryDetailed(x).Levels
	for i := range 100_000 {
		k := fmt.Appendf(nil, "b-%d", i)
		d := s.QueryDetailed(k).Levels
		if d[0].Index == dx[0].Index && d[1].Index != dx[1].Index &&
			core.StripeOf(core.SketchOf(s), k) != core.StripeOf(core.SketchOf(s), x) {
			return x, k
		}
	}
	t.Fatal("no key sharing only level 0 with x")
	return nil, nil
}

// TestNoWriteCommitChecksSkippedLevel: an admitted TryUpdate(x) whose
// level 0 is pinned at Hi (by a key b sharing that cell) skips that
// level's CAS and checks it with a load instead. Held before that check,
// it meets b's Update a second later, which decays the cell and writes
// it; the check must fail as the CAS would have (a conflict at level 0),
// and the call decides again and adds its 1 on top of b's write. Without
// the check the call would commit level 1 alone and its 1 would be
// missing from level 0: its decision would rest on a value (Hi) the cell
// no longer held when the other level was written.
func TestNoWriteCommitChecksSkippedLevel(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 100, Decay: decay.Exponential(1), Clock: clk})
	x, b := nwKeys(t, s)
	s.Update(b, 100) // x's level 0 at Hi; x's level 1 at 0
	hold := newHoldPoint(0, 1)
	var conflicts atomic.Int32
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook, Conflict: func(l uint32) {
		if l == 0 {
			conflicts.Add(1)
		}
	}})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(x, 1, 100) }() // min(100, 0) + 1 <= 100
	hold.wait(t, "x's check of level 0")
	clk.Advance(time.Second)
	s.Update(b, 1) // level 0: 100·e^-1 + 1 at the new stamp
	c0 := s.QueryDetailed(x).Levels[0].Score
	close(hold.release)
	if !<-done {
		t.Fatal("TryUpdate(x, 1, 100) denied")
	}
	if got := conflicts.Load(); got != 1 {
		t.Errorf("%d conflicts at level 0, want 1: the check of the skipped level did not see b's write", got)
	}
	got := s.QueryDetailed(x).Levels
	if got[0].Score < c0+1 {
		t.Errorf("level 0 = %v after x's commit, want >= %v + 1 (b's write, then x's 1)", got[0].Score, c0)
	}
	if want := math.Exp(-1); math.Abs(got[1].Score-want) > 1e-6 {
		t.Errorf("level 1 = %v, want x's 1 decayed for the second since its time, %v", got[1].Score, want)
	}
}

// TestNoWriteReadOnlyAdmissionChecksStripe: an admitted TryUpdate that
// changes no cell does not take its stripe; it reads the stripe's seq
// before its snapshot and again after checking the cells. Held between
// the first seq read and the snapshot, it meets a commit of another key
// on the same stripe; the seq check must fail and the call decide again
// (a second snapshot), as it would have had to wait for the stripe.
func TestNoWriteReadOnlyAdmissionChecksStripe(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1024, Hi: 100, Decay: decay.Exponential(1), Clock: clk})
	x := []byte("x")
	var y []byte
	for i := 0; y == nil; i++ {
		k := fmt.Appendf(nil, "y-%d", i)
		dx, dk := s.QueryDetailed(x).Levels, s.QueryDetailed(k).Levels
		if core.StripeOf(core.SketchOf(s), k) == core.StripeOf(core.SketchOf(s), x) && dx[0].Index != dk[0].Index && dx[1].Index != dk[1].Index {
			y = k
		}
	}
	s.Update(x, 100) // pinned at Hi
	seq := core.StripeSeq(core.SketchOf(s), x)
	hold := newHoldPoint(0, 1)
	var loads atomic.Int32
	core.SetHooks(core.SketchOf(s), core.Hooks{Load: func(l uint32) { loads.Add(1); hold.hook(l) }})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(x, 1, 1000) }()
	hold.wait(t, "x's snapshot")
	if !s.TryUpdate(y, 1, 1000) { // a commit on x's stripe
		t.Fatal("TryUpdate(y) denied")
	}
	close(hold.release)
	if !<-done {
		t.Fatal("TryUpdate(x, 1, 1000) denied at 100")
	}
	// x's first snapshot, y's, x's second.
	if got := loads.Load(); got != 3 {
		t.Errorf("%d snapshots, want 3: x's read-only admission did not see y's commit on its stripe", got)
	}
	if got := core.StripeSeq(core.SketchOf(s), x); got != seq+2 {
		t.Errorf("stripe seq %d -> %d, want one commit (y's; x writes nothing)", seq, got)
	}
	if got := s.Query(x); got != 100 {
		t.Errorf("Query(x) = %v, want 100", got)
	}
}

// TestNoWriteReadOnlyAdmissionChecksCells: the read-only admission's
// check of the cells. TryUpdate(x) on a key pinned at Hi is held at its
// check of level 0; meanwhile a second passes and b, which shares that
// cell, writes it (decayed, below Hi). The check must fail, and the call
// decide again and commit its 1 on top of b's write (a CAS now, since the
// cell is below Hi).
func TestNoWriteReadOnlyAdmissionChecksCells(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 100, Decay: decay.Exponential(1), Clock: clk})
	x, b := nwKeys(t, s)
	s.Update(x, 100) // both of x's levels at Hi
	seq := core.StripeSeq(core.SketchOf(s), x)
	hold := newHoldPoint(0, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{Skip: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(x, 1, 1000) }()
	hold.wait(t, "x's check of level 0")
	clk.Advance(time.Second)
	s.Update(b, 1)
	c0 := s.QueryDetailed(x).Levels[0].Score
	if !(c0 < 100) {
		t.Fatalf("level 0 = %v after b's Update a second later, want below Hi", c0)
	}
	close(hold.release)
	if !<-done {
		t.Fatal("TryUpdate(x, 1, 1000) denied")
	}
	if got := s.QueryDetailed(x).Levels[0].Score; got < c0+1 {
		t.Errorf("level 0 = %v, want >= %v + 1: x's check missed b's write and its 1 is lost", got, c0)
	}
	if got := core.StripeSeq(core.SketchOf(s), x); got != seq+2 {
		t.Errorf("stripe seq %d -> %d, want x's one commit", seq, got)
	}
}
