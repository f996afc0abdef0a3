package sketch_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a106Cells returns key's cell index at each level.
func a106Cells(s *sketch.Sketch, key []byte) []uint32 {
	d := s.QueryDetailed(key)
	out := make([]uint32, len(d.Levels))
	for i, lv := range d.Levels {
		out[i] = lv.Index
	}
	return out
}

// a106Find returns a key prefix-i whose cells satisfy want, on a stripe
// no earlier key took.
func a106Find(t *testing.T, s *sketch.Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) []byte {
	t.Helper()
	for i := range 200000 {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		st := core.StripeOf(core.SketchOf(s), k)
		if used[st] || !want(a106Cells(s, k)) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return nil
}

// TestAudit106FixedDeniedNegativeTryUpdateOnlyReads (audit 106; fixed at stop 61, the text below
// says what was wrong): the contract says a
// denied TryUpdate only reads. A TryUpdate with a negative delta that is
// denied (aggregate + delta > limit) writes no cell, but tryHold calls
// markNegative before it decides, so it sets the sketch-wide "a negative
// delta has been applied" flag for good. That flag turns off roll-back
// case 3 (the same-millisecond subtraction, docs/design.md "Roll-backs")
// for every key from then on. So the denied call changes what later
// operations do: below, X's TryUpdate meets a commit conflict (Y writes
// X's level-1 cell, Z writes X's level-0 cell after X's CAS there, all in
// one millisecond, below Hi, no negative delta ever applied) and is
// denied on its fresh snapshot. Without the earlier denied call its undo
// subtracts its 1 from level 0 exactly; after it, the undo refuses and
// the denied X leaves its 1 in the cell (an over-estimate for every key
// of that cell, and a denial that wrote). The two histories differ only
// by a call that, per the contract, only read.
func TestAudit106FixedDeniedNegativeTryUpdateOnlyReads(t *testing.T) {
	a106PreludeThenConflict(t, "a denied TryUpdate(w, -1, -100)", func(t *testing.T, s *sketch.Sketch, w []byte) {
		// 0 + (-1) <= -100 is false: denied, and it writes no cell.
		if s.TryUpdate(w, -1, -100) {
			t.Fatal("TryUpdate(w, -1, -100) admitted on an empty sketch")
		}
	})
}

// TestAudit106FixedNoOpNegativeUpdateWritesNothing (audit 106; fixed at stop 61, the text below
// says what was wrong): "a write that changes
// nothing does not write". Update(w, -1) on empty cells with Lo = 0 is cut
// entirely at Lo at the cells' own stamp: the engine skips every CAS (no
// cell changes), yet markNegative has already set the sketch-wide flag,
// with the same lasting effect on later roll-backs as above.
func TestAudit106FixedNoOpNegativeUpdateWritesNothing(t *testing.T) {
	a106PreludeThenConflict(t, "an Update(w, -1) that changed no cell (cut at Lo = 0)", func(t *testing.T, s *sketch.Sketch, w []byte) {
		s.Update(w, -1)
	})
}

// a106PreludeThenConflict runs, on two fresh sketches, a forced commit
// conflict of X (see TestAudit106CoreDeniedNegativeTryUpdateOnlyReads),
// one of them after prelude, which must leave every cell as it was; it
// fails if the prelude changes X's outcome.
func a106PreludeThenConflict(t *testing.T, what string, prelude func(t *testing.T, s *sketch.Sketch, w []byte)) {
	run := func(t *testing.T, withPrelude bool) (level0 float64, xOK bool) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: 0, Hi: 100, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		used := map[uint64]bool{}
		x := a106Find(t, s, "x", used, func([]uint32) bool { return true })
		cx := a106Cells(s, x)
		y := a106Find(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
		z := a106Find(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
		w := a106Find(t, s, "w", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] != cx[1] })
		if withPrelude {
			prelude(t, s, w)
			for _, k := range [][]byte{w, x, y, z} {
				for _, lv := range s.QueryDetailed(k).Levels {
					if lv.Score != 0 {
						t.Fatalf("the prelude wrote a cell: %+v", lv)
					}
				}
			}
		}
		fired := false
		core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: func(l uint32) {
			if l != 1 || fired {
				return
			}
			fired = true
			s.Update(z, 1) // on X's level 0, after X's CAS there
			s.Update(y, 1) // on X's level 1: X's CAS there fails
		}})
		xOK = s.TryUpdate(x, 1, 1)
		if !fired {
			t.Fatal("the hook never ran")
		}
		return s.QueryDetailed(x).Levels[0].Score, xOK
	}
	base, baseOK := run(t, false)
	got, gotOK := run(t, true)
	if baseOK || gotOK {
		t.Fatalf("X admitted (%v, %v): want denied on its fresh snapshot (min 1 + 1 > 1)", baseOK, gotOK)
	}
	if base != 1 {
		t.Fatalf("without the prelude, X's level-0 cell = %v after X's denial; want 1 (Z's alone)", base)
	}
	if got != base {
		t.Errorf("%s, which wrote no cell, changed a later history: "+
			"X's level-0 cell reads %v after X's denial, %v without that earlier call "+
			"(it set the sketch's negative flag, so X's same-millisecond undo refused and X's 1 stayed)", what, got, base)
	}
}
