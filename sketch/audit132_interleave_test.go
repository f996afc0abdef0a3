package sketch_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 132: deterministic replays of commit interleavings the design
// argument (docs/design.md, section 3) worries about that no earlier
// replay forces, driven through the per-sketch hooks (holdPoint and
// keysOnDistinctStripes are replay_test.go's).

// a132Within reports whether ch delivers within d.
func a132Within(ch <-chan bool, d time.Duration) (bool, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-time.After(d):
		return false, false
	}
}

// a132Ulps bounds got to [want, want + n float32 steps above want].
func a132Ulps(got, want float64, n int) bool {
	if got < want {
		return false
	}
	hi := float32(want)
	if float64(hi) < want {
		hi = math.Nextafter32(hi, float32(math.Inf(1)))
	}
	for range n {
		hi = math.Nextafter32(hi, float32(math.Inf(1)))
	}
	return got <= float64(hi)
}

// TestAudit132RollbackHeldBetweenUndoLevels holds an undo between two of
// its levels and lets a colliding key on another stripe decide there.
// L=3, M=1 (every key's estimate is the total), no decay, frozen clock.
//
//	X snapshots (0,0,0), CASes c0, c1, is held before its CAS on c2
//	Update(W) lands: (x+w, x+w, w); X's CAS on c2 fails
//	X undoes c0 (written since, same ms, below Hi: subtract) and is held
//	before undoing c1: cells (w, x+w, w)
//	Z decides on Min = w: admitted, commits (w+z, x+w+z, w+z)
//	X undoes c1 (subtract), decides again on w+z
//
// design.md ("the roll-back", case 3): "it holds the others' mass plus
// the increment, and the subtraction is exact up to rounding, which is
// upward". Every read in between must be >= the admitted truth, and the
// cells must end at the admitted total (integers: exactly; fractions:
// at or a few float32 steps above).
func TestAudit132RollbackHeldBetweenUndoLevels(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dx, dw    float64
		dz, limit float64
		xAdmit    bool
		ulps      int
	}{
		{"int-denied", 1, 1, 1, 2, false, 0},
		{"int-admitted", 1, 1, 1, 10, true, 0},
		{"frac-admitted", 0.1, 0.2, 0.3, 10, true, 4},
		{"frac-denied", 0.1, 0.2, 0.3, 0.55, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 100, Clock: sketchtest.NewFakeClock()})
			keys := keysOnDistinctStripes(t, s, 3)
			x, w, z := keys[0], keys[1], keys[2]
			before2 := newHoldPoint(2, 1)
			undo1 := newHoldPoint(1, 1)
			conflicts := 0
			core.SetHooks(core.SketchOf(s), core.Hooks{
				BeforeCAS: before2.hook,
				Rollback:  undo1.hook,
				Conflict:  func(uint32) { conflicts++ },
			})
			xDone := make(chan bool)
			go func() { xDone <- s.TryUpdate(x, tc.dx, tc.limit) }()
			before2.wait(t, "X's CAS on c2")
			s.Update(w, tc.dw)
			close(before2.release)
			undo1.wait(t, "X's undo of c1")
			// Truth now: W alone. c0 undone, c1 still holds X's share.
			for _, k := range [][]byte{x, w, z} {
				if q := s.Query(k); !a132Ulps(q, tc.dw, tc.ulps) {
					t.Errorf("mid-undo Query = %v, want W's %v (up to %d float32 steps above)", q, tc.dw, tc.ulps)
				}
			}
			if !s.TryUpdate(z, tc.dz, tc.limit) {
				t.Fatalf("Z denied on Min = %v with limit %v", s.Query(z), tc.limit)
			}
			if q := s.Query(w); q < tc.dw+tc.dz {
				t.Errorf("after Z: Query = %v below the truth %v", q, tc.dw+tc.dz)
			}
			close(undo1.release)
			got := <-xDone
			if got != tc.xAdmit {
				t.Fatalf("X admitted = %v, want %v (decided again on W+Z = %v, limit %v)", got, tc.xAdmit, tc.dw+tc.dz, tc.limit)
			}
			if conflicts != 1 {
				t.Errorf("%d commit conflicts, want 1 (X's CAS on c2)", conflicts)
			}
			want := tc.dw + tc.dz
			if got {
				want += tc.dx
			}
			for _, l := range s.QueryDetailed(x).Levels {
				if !a132Ulps(l.Score, want, tc.ulps) {
					t.Errorf("level %d holds %v, want the admitted total %v (up to %d float32 steps above)", l.Level, l.Score, want, tc.ulps)
				}
			}
		})
	}
}

// TestAudit132SameStripeWaitsForHeldCommit: "Admitted calls of one
// stripe commit one at a time" (design.md, "Exactness"). X's
// TryUpdate(x, 1, 1) is held between its two CASes (the stripe odd); a
// second TryUpdate of x and one of a key y on x's stripe but in other
// cells must not return while X is held (both would be admitted on what
// they read, so both need the stripe), and after X's release the second
// x is denied (it decides again on 1) and y admitted. A Query of x in
// the middle reads 0 under Min (the admission has not taken effect).
func TestAudit132SameStripeWaitsForHeldCommit(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: sketchtest.NewFakeClock()})
	cs := core.SketchOf(s)
	x := []byte("x")
	xl := s.QueryDetailed(x).Levels
	var y []byte
	for i := 0; y == nil; i++ {
		k := []byte{'y', byte(i), byte(i >> 8)}
		if core.StripeOf(cs, k) != core.StripeOf(cs, x) {
			continue
		}
		yl := s.QueryDetailed(k).Levels
		if yl[0].Index != xl[0].Index && yl[1].Index != xl[1].Index {
			y = k
		}
	}
	seq0 := core.StripeSeq(cs, x)
	hold := newHoldPoint(1, 1)
	core.SetHooks(cs, core.Hooks{BeforeCAS: hold.hook})
	xDone, x2Done, yDone := make(chan bool, 1), make(chan bool, 1), make(chan bool, 1)
	go func() { xDone <- s.TryUpdate(x, 1, 1) }()
	hold.wait(t, "X's CAS on c1")
	if seq := core.StripeSeq(cs, x); seq != seq0+1 {
		t.Errorf("stripe seq %d while X commits, want %d (odd)", seq, seq0+1)
	}
	if q := s.Query(x); q != 0 {
		t.Errorf("Query(x) mid-commit = %v, want 0 under Min", q)
	}
	go func() { x2Done <- s.TryUpdate(x, 1, 1) }()
	go func() { yDone <- s.TryUpdate(y, 1, 1) }()
	if v, ok := a132Within(x2Done, 100*time.Millisecond); ok {
		t.Fatalf("second TryUpdate(x) returned %v while X held the stripe", v)
	}
	if v, ok := a132Within(yDone, 50*time.Millisecond); ok {
		t.Fatalf("TryUpdate(y) on x's stripe returned %v while X held the stripe", v)
	}
	close(hold.release)
	if !<-xDone {
		t.Fatal("X denied on 0 + 1 <= 1")
	}
	if <-x2Done {
		t.Error("second TryUpdate(x, 1, 1) admitted after X: 2 admitted with limit 1")
	}
	if !<-yDone {
		t.Error("TryUpdate(y, 1, 1) denied: y's cells hold 0")
	}
	if qx, qy := s.Query(x), s.Query(y); qx != 1 || qy != 1 {
		t.Errorf("Query(x), Query(y) = %v, %v; want 1, 1", qx, qy)
	}
	if seq := core.StripeSeq(cs, x); seq != seq0+4 {
		t.Errorf("stripe seq %d after two commits, want %d", seq, seq0+4)
	}
}

// TestAudit132ClampAtHiMidCommit: an Update of a colliding key cuts both
// cells at Hi between X's two CASes. X's undo of c0 meets a cell at Hi
// ("Anything else (... it is at Hi ...): the cell keeps the increment")
// so the level is held; X decides again on the clamped cells, counting
// its own share twice (the safe side). L=2, M=1, Hi=10, no decay.
//
//	Update(W, 5): (5,5); X = TryUpdate(x, 3, limit) writes c0 = 8, held
//	Query mid-commit = 5 (Min): W's truth, X not yet in effect
//	Update(W, 5): c0 8+5 cut to 10, c1 10; X's CAS on c1 fails
//	X rereads (10,10): limit 12 denies (10 + 3 > 12), limit 100 admits
//
// Either way every cell ends at Hi, which is W's own truth.
func TestAudit132ClampAtHiMidCommit(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		admit bool
	}{{12, false}, {100, true}} {
		s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 10, Clock: sketchtest.NewFakeClock()})
		keys := keysOnDistinctStripes(t, s, 2)
		x, w := keys[0], keys[1]
		s.Update(w, 5)
		hold := newHoldPoint(1, 1)
		var held, rolled []uint32
		core.SetHooks(core.SketchOf(s), core.Hooks{
			BeforeCAS: hold.hook,
			Held:      func(l uint32) { held = append(held, l) },
			Rollback:  func(l uint32) { rolled = append(rolled, l) },
		})
		done := make(chan bool)
		go func() { done <- s.TryUpdate(x, 3, tc.limit) }()
		hold.wait(t, "X's CAS on c1")
		if q := s.Query(w); q != 5 {
			t.Errorf("limit %v: Query mid-commit = %v, want 5", tc.limit, q)
		}
		s.Update(w, 5)
		close(hold.release)
		if got := <-done; got != tc.admit {
			t.Errorf("limit %v: X admitted = %v, want %v (decided again on 10)", tc.limit, got, tc.admit)
		}
		if len(rolled) != 1 || rolled[0] != 0 {
			t.Errorf("limit %v: undo visited levels %v, want [0]", tc.limit, rolled)
		}
		if !tc.admit && (len(held) != 1 || held[0] != 0) {
			t.Errorf("limit %v: held levels %v, want [0] (c0 at Hi keeps X's 3)", tc.limit, held)
		}
		for _, l := range s.QueryDetailed(x).Levels {
			if l.Score != 10 {
				t.Errorf("limit %v: level %d holds %v, want Hi = 10", tc.limit, l.Level, l.Score)
			}
		}
	}
}

// TestAudit132SweepDuringHeldCommit: the horizon sweep re-stamps X's
// cells while X's admitted TryUpdate is held between its CASes. L=2,
// M=1, no decay (so the sweep changes stamps only), W's Update after a
// clock jump is the operation that sweeps (2^30 ms: the sweep falls
// due and re-stamps every cell older than 2^29 ms; 2^31 + 1000 ms: the
// operation re-bases every cell to its own time first).
//
//	Update(W, 1): (1,1); X = TryUpdate(x, 1, limit) writes c0 = 2, held
//	jump; Update(W, 1) sweeps and adds: (3,2) at the new stamp
//	X's CAS on c1 fails (re-stamped); X's undo of c0 finds it written
//	since at another stamp (design.md, "the roll-back", case 4): the
//	level keeps X's 1; X decides again on (3,2)
//
// limit 10: admitted, (3,3), exactly W + X; limit 2: denied (2 + 1 > 2)
// with c0 keeping X's 1, (3,2): Min 2 is W's truth. No read below the
// truth at any point.
func TestAudit132SweepDuringHeldCommit(t *testing.T) {
	for _, jump := range []int64{1 << 30, 1<<31 + 1000} {
		for _, tc := range []struct {
			limit float64
			admit bool
			want  [2]float64
		}{{10, true, [2]float64{3, 3}}, {2, false, [2]float64{3, 2}}} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Decay: decay.None(), Clock: clk})
			keys := keysOnDistinctStripes(t, s, 2)
			x, w := keys[0], keys[1]
			s.Update(w, 1)
			hold := newHoldPoint(1, 1)
			conflicts := 0
			var held []uint32
			core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook, Conflict: func(uint32) { conflicts++ },
				Held: func(l uint32) { held = append(held, l) }})
			done := make(chan bool, 1)
			go func() { done <- s.TryUpdate(x, 1, tc.limit) }()
			hold.wait(t, "X's CAS on c1")
			clk.Set(1_000_000 + jump)
			wDone := make(chan bool, 1)
			go func() { s.Update(w, 1); wDone <- true }()
			if _, ok := a132Within(wDone, 10*time.Second); !ok {
				close(hold.release)
				t.Fatalf("jump %d: the sweeping Update waited on a held commit", jump)
			}
			if q := s.Query(w); q < 2 {
				t.Errorf("jump %d limit %v: mid-commit Query = %v below W's truth 2", jump, tc.limit, q)
			}
			close(hold.release)
			if got := <-done; got != tc.admit {
				t.Errorf("jump %d: X admitted = %v with limit %v, want %v", jump, got, tc.limit, tc.admit)
			}
			if conflicts != 1 {
				t.Errorf("jump %d limit %v: %d conflicts, want 1", jump, tc.limit, conflicts)
			}
			if !tc.admit && (len(held) != 1 || held[0] != 0) {
				t.Errorf("jump %d: held levels %v, want [0] (c0 re-stamped since X wrote it)", jump, held)
			}
			for _, l := range s.QueryDetailed(x).Levels {
				if l.Score != tc.want[l.Level] {
					t.Errorf("jump %d limit %v: level %d holds %v, want %v", jump, tc.limit, l.Level, l.Score, tc.want[l.Level])
				}
			}
		}
	}
}

// TestAudit132InterleavedUndosABA: two admitted commits of colliding keys
// on different stripes both conflict, and one undo meets its own stored
// word again after the other call's undo and a third writer (an ABA on
// the word; design.md, "ABA"). L=3, M=1, frozen clock; X adds 1, Y adds 2,
// W (an Update) adds 1.
//
//	X snapshots (0,0,0), CASes c0 = 1, is held before c1
//	Y snapshots (1,0,0), CASes c0 = 3, c1 = 2, is held before c2
//	X's CAS on c1 fails; X's undo subtracts at c0 (same ms): (2,2,0);
//	X is held before its fresh snapshot
//	Update(W, 1): (3,3,1): c0 holds Y's stored word 3 again, but now
//	as W + Y, not X + Y
//	Y's CAS on c2 fails; Y's undo: c0 still "holds the word it stored"
//	-> CAS to its restore 1 (which is W's 1, by value); c1 subtracts 2:
//	(1,1,1) = W; Y decides again
//	X decides again
//
// Values, not identities, matter at one stamp, so the undo is exact:
// every read in between is >= the truth and the cells end at the
// admitted total.
func TestAudit132InterleavedUndosABA(t *testing.T) {
	for _, tc := range []struct {
		limit        float64
		xAdmit, want float64
	}{{100, 1, 4}, {3, 0, 3}} {
		s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 100, Clock: sketchtest.NewFakeClock()})
		keys := keysOnDistinctStripes(t, s, 3)
		x, y, w := keys[0], keys[1], keys[2]
		xAt1 := newHoldPoint(1, 1)    // X before its CAS on c1
		yAt2 := newHoldPoint(2, 1)    // Y before its CAS on c2
		xReread := newHoldPoint(1, 1) // X after its undo (conflict at level 1)
		core.SetHooks(core.SketchOf(s), core.Hooks{
			BeforeCAS: func(l uint32) { xAt1.hook(l); yAt2.hook(l) },
			Reread:    xReread.hook,
		})
		levels := func() []float64 {
			var v []float64
			for _, l := range s.QueryDetailed(x).Levels {
				v = append(v, l.Score)
			}
			return v
		}
		same := func(got []float64, want ...float64) bool {
			for i := range want {
				if got[i] != want[i] {
					return false
				}
			}
			return true
		}
		xDone, yDone := make(chan bool, 1), make(chan bool, 1)
		go func() { xDone <- s.TryUpdate(x, 1, tc.limit) }()
		xAt1.wait(t, "X before c1")
		go func() { yDone <- s.TryUpdate(y, 2, tc.limit) }()
		yAt2.wait(t, "Y before c2")
		if got := levels(); !same(got, 3, 2, 0) {
			t.Fatalf("limit %v: X and Y held: cells %v, want [3 2 0]", tc.limit, got)
		}
		close(xAt1.release)
		xReread.wait(t, "X's fresh snapshot")
		if got := levels(); !same(got, 2, 2, 0) {
			t.Fatalf("limit %v: after X's undo cells %v, want [2 2 0]", tc.limit, got)
		}
		s.Update(w, 1)
		if q := s.Query(w); q < 1 {
			t.Errorf("limit %v: Query = %v below W's 1", tc.limit, q)
		}
		close(yAt2.release)
		if !<-yDone {
			t.Fatalf("limit %v: Y denied: it decides again on W's 1 + 2 <= %v", tc.limit, tc.limit)
		}
		if got := levels(); !same(got, 3, 3, 3) {
			t.Errorf("limit %v: after Y's undo and new commit cells %v, want [3 3 3] (W + Y)", tc.limit, got)
		}
		close(xReread.release)
		if got := <-xDone; got != (tc.xAdmit == 1) {
			t.Errorf("limit %v: X admitted = %v, want %v", tc.limit, got, tc.xAdmit == 1)
		}
		if got := levels(); !same(got, tc.want, tc.want, tc.want) {
			t.Errorf("limit %v: cells end at %v, want %v each (W + Y + admitted X)", tc.limit, got, tc.want)
		}
	}
}
