package sketch_test

// Audit 94 (a documented limitation since stop 58): under Linear, a cell of other stamped after the
// merge instant that has drained to 0 is not read back: merge.go reads
// back "net < 0 && v0 > 0" only, and then skips b == 0. WriteTo reads
// such a 0 back (docs/snapshots.md, "Consistency under concurrent
// updates": "a 0 is read back too (Linear: rate x lead, what a drained
// score may have held at T) ... a delta-0 write or a horizon sweep
// re-stamps a cell that drained to 0", audit 65), and a cell holding
// 0.001 there is read back by Merge: the merged key falls from about
// rate x lead to 0 where other's last write was 0 instead of 0.001.
//
// Reproduction: Linear(1000), s (empty) on a clock at T; other on a
// clock ahead (a replica whose clock is ahead: "every write of its last
// skew ms" is stamped after the instant, docs/snapshots.md "Merge"):
// other writes 10 at T+30 ms (it reads 5 at T+35 ms), and a delta 0 at
// T+50 ms re-stamps the drained cell (0 at T+50 ms). s.Merge(other):
// at T+35 ms s reads 0 where other's own reading of the key (and the
// union's) was 5; with a last write of 0.001 instead of 0, s reads
// 15.001 there.
//
// Contract: internal/core/merge.go:46-47 (Linear: "Merge takes a + b,
// which is never below either input's truth"); merge.go:15-19 ("A cell
// of other stamped after that instant ... cannot be read at it: a
// positive score is read back to it", the 0 not being a credit nor a
// custom law's score, for which the rule "merged at its own stamp's
// value with the merged cell stamped that far after s's instant" is not
// applied either: the cell is skipped); internal/core/snapshot.go:418-
// 422 (restate: "read back to T ... as Merge does with a cell written
// during a merge ... A 0 is read back too"); docs/snapshots.md:199, 209.
//
// Stop 58 read such a 0 back, then took it out again: audit 95 showed
// every empty cell of a replica created or swept after the instant is
// stamped after it, so each would read rate x lead (Linear) or Hi
// (Exponential past lambda x lead = 709). Merge's doc and
// docs/snapshots.md ("Merge") now state that a 0 is not read back;
// restate's "as Merge does" no longer claims it. The test asserts the
// documented behaviour: 0.001 is read back (15.001 at T+35 ms), 0 merges
// as 0 (below other's reading of 5 then, by up to rate x lead).

import (
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

func TestAudit94MergeLinearZeroAheadNotReadBack(t *testing.T) {
	for _, last := range []float64{0.001, 0} {
		s, cs := a93Sketch(t, decay.Linear(1000), 0, 100, sketch.Min, a93T)
		o, co := a93Sketch(t, decay.Linear(1000), 0, 100, sketch.Min, a93T+30)
		o.UpdateString("k", 10)
		co.Set(a93T + 35)
		theirs := o.QueryString("k") // 5: other's reading at T+35ms
		co.Set(a93T + 50)
		o.UpdateString("k", last) // a delta 0 re-stamps the drained cell
		if err := s.Merge(o); err != nil {
			t.Fatal(err)
		}
		cs.Set(a93T + 35)
		got := s.QueryString("k")
		switch {
		case last > 0 && got < theirs:
			t.Errorf("last write %v at T+50ms: merged reads %v at T+35ms, below other's reading %v then (a positive score is read back)", last, got, theirs)
		case last == 0 && got != 0:
			t.Errorf("last write 0 at T+50ms: merged reads %v at T+35ms; the docs say a 0 is not read back (merges as 0)", got)
		case last == 0 && theirs > 1000*0.05:
			t.Errorf("other read %v at T+35ms, more than rate x lead (50): the documented bound of the loss", theirs)
		}
	}
}
