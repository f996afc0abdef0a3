package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a106Levels returns key's per-level cell indexes and scores.
func a106Levels(s *core.Sketch, key []byte) ([]uint32, []float64) {
	type lv struct {
		i uint32
		v float64
	}
	_, ls := core.Detailed(s, key, func(_, index uint32, score float64) lv { return lv{index, score} })
	idx, sc := make([]uint32, len(ls)), make([]float64, len(ls))
	for l, x := range ls {
		idx[l], sc[l] = x.i, x.v
	}
	return idx, sc
}

func a106CoreFind(t *testing.T, s *core.Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) []byte {
	t.Helper()
	for i := range 200000 {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		st := core.StripeOf(s, k)
		if c, _ := a106Levels(s, k); used[st] || !want(c) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return nil
}

// TestAudit106FixedRefundReportsHeldLevelGivenBack (audit 106; fixed at stop 61, the text below
// says what was wrong): Sketch.Refund "reports
// whether every level was given back" (and Rotator.Refund folds that into
// "whether everything still live was given back"). An admitted
// TryReserve whose first commit met a conflict, and whose undo of level 0
// was refused (the cell was written a millisecond later: roll-back case
// 4), keeps its increment in level 0 ("held") and commits that level
// with a zero delta on the retry. commitConflict then records
// restore == stored for the held level ("nothing to give back"), so a
// later Refund counts that level as given back: it reports true while
// level 0 still carries the reservation's 1 (the cell reads 2, Z's 1 and
// X's 1, where a refund that gave everything back leaves Z's 1).
func TestAudit106FixedRefundReportsHeldLevelGivenBack(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 8, Lo: 0, Hi: 100, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint64]bool{}
	x := a106CoreFind(t, s, "x", used, func([]uint32) bool { return true })
	cx, _ := a106Levels(s, x)
	y := a106CoreFind(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
	z := a106CoreFind(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
	fired := false
	core.SetHooks(s, core.Hooks{BeforeCAS: func(l uint32) {
		if l != 1 || fired {
			return
		}
		fired = true
		clk.Advance(time.Millisecond)
		s.Update(z, 1) // X's level 0, a ms after X's CAS there: X's undo must keep its 1
		s.Update(y, 1) // X's level 1: X's CAS there fails
	}})
	rc, ok := s.TryReserveAt(clk.Now(), x, 1, 100)
	core.SetHooks(s, core.Hooks{})
	if !fired || !ok {
		t.Fatalf("hook fired %v, admitted %v: want both", fired, ok)
	}
	_, before := a106Levels(s, x)
	if before[0] != 2 || before[1] != 2 {
		t.Fatalf("after the admission X's cells read %v; want [2 2] (X's 1 plus Z's, plus Y's)", before)
	}
	all := s.Refund(&rc)
	_, after := a106Levels(s, x)
	t.Logf("Refund reported %v; X's cells %v -> %v", all, before, after)
	if all && after[0] != 1 {
		t.Errorf("Refund reported every level given back, but X's level-0 cell still holds its 1: reads %v, want 1 (Z's alone), or Refund should report false", after[0])
	}
}

// TestAudit106FixedReservedAfterStaleRetry (audit 106; fixed at stop 61, the text below
// says what was wrong): Reserved "returns the key's
// estimate right after the admitted call rc records, its own increment
// included, and the time it holds at: what a Query at that instant would
// have read". tryHold records rc.ms as the time it started with; when the
// commit meets a conflict and the fresh snapshot finds that time stale
// (a clock jump of 2^31 ms or more re-based the cells meanwhile,
// horizon.go), commitConflict's loadAll moves its own copy of ms to the
// clock's reading and stamps the words there, but rc.ms keeps the old
// time. Reserved then reads words stamped 2^31+ ms after rc.ms: the
// int32 difference is negative, so it does not move to their stamps, and
// ValueN at the old stamp sees an age of 2^32 - (2^31 + lead), decaying
// every word by about 24.8 days that never passed. Under Linear(0.001/s)
// the key reads 7853.5 at every instant from the commit on, Reserved
// reports about 5707, at a time 24.8 days before the commit.
func TestAudit106FixedReservedAfterStaleRetry(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 8, Lo: 0, Hi: 1e9, Decay: decay.Linear(0.001), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint64]bool{}
	x := a106CoreFind(t, s, "x", used, func([]uint32) bool { return true })
	cx, _ := a106Levels(s, x)
	y := a106CoreFind(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
	s.Update(x, 10000)
	fired := false
	core.SetHooks(s, core.Hooks{BeforeCAS: func(l uint32) {
		if l != 1 || fired {
			return
		}
		fired = true
		clk.Advance((1<<31 + 1000) * time.Millisecond) // past the horizon: the next operation re-bases every cell
		s.Update(y, 1)                                 // X's level 1: X's CAS there fails
	}})
	rc, ok := s.TryReserveAt(clk.Now(), x, 1, 1e9)
	core.SetHooks(s, core.Hooks{})
	if !fired || !ok {
		t.Fatalf("hook fired %v, admitted %v: want both", fired, ok)
	}
	now := s.Timebase().NowMillis()
	q := s.Query(x)
	ms, v := s.Reserved(&rc)
	t.Logf("Query at %d: %v; Reserved: %v at %d", now, q, v, ms)
	if v < q {
		t.Errorf("Reserved reads %v below the key's estimate %v at every instant since the commit (Reserved's time %d, the commit's %d: %d ms early)", v, q, ms, now, now-ms)
	}
}
