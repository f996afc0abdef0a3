package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37RollbackAfterLinearMergeKeepsMergedMass: the Linear law,
// Lo = -100, L=2, M=1 (every key in the same two cells).
//   - s is restored from a snapshot whose cells hold a credit of -5.
//   - Replica o saw only Update(y, 4).
//   - A's TryUpdate(A, 3, 3.5) commits level 0 (-5 -> -2) and is held
//     before level 1.
//   - s.Merge(o) takes max(a + b, a, b) = 4 in both cells, which drops
//     A's +3 from level 0.
//   - A's CAS on level 1 fails, and A undoes level 0.
//
// A subtraction (rule 3) would take 3 of o's 4. It must not happen:
// restoring negative cells sets the negative-delta flag (snapshot.go
// markNegative), so only the exact CAS undo applies and it fails. After
// that, Query(y) stays >= 4, y's truth in o ("never below either
// input's truth", internal/core/merge.go).
func TestAudit37RollbackAfterLinearMergeKeepsMergedMass(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(2_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 1, Decay: decay.Linear(1), Lo: -100, Hi: 100, Clock: clk}
	src := mustNewSketch(t, cfg)
	src.UpdateString("x", -5)
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s := mustNewSketch(t, cfg)
	if err := s.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	o := mustNewSketch(t, cfg)
	o.UpdateString("y", 4)
	a := keysOnDistinctStripes(t, s, 1)[0]
	hold := newHoldPoint(1, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(a, 3, 3.5) }()
	hold.wait(t, "A's CAS on level 1")
	if err := s.Merge(o); err != nil {
		t.Fatal(err)
	}
	afterMerge := s.QueryString("y")
	close(hold.release)
	admitted := <-done
	core.SetHooks(core.SketchOf(s), core.Hooks{})
	got, want := s.QueryString("y"), o.QueryString("y")
	if got < want {
		d := s.QueryDetailed([]byte("y"))
		t.Errorf("Query(y) = %v after A's roll-back (A admitted: %v; right after the merge it read %v; levels %v, %v), want >= %v, y's truth in the merged replica o: a rule-3 roll-back subtracted A's +3 from a cell whose linear merge had taken max(a+b, b) and dropped it (internal/core/merge.go: \"never below either input's truth\"; sketch/doc.go: roll-backs give back \"only where that cannot take another key's mass\")", got, admitted, afterMerge, d.Levels[0].Score, d.Levels[1].Score, want)
	}
}
