package sketch_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87SkFixedNegativeDenialLeavesKeyBelowTruth: one key, no
// other key in the sketch (so no collision), no decay, a fixed clock.
// Three goroutines add +3 then -3 with Update (net 0, from outside the
// TryUpdate stripe); a fourth calls TryUpdate(k, -1, 0) and, when it is
// admitted, Update(k, +1) (net 0); GOMAXPROCS 4, short rounds. When the key is quiescent its true
// score is exactly 0, and with one key every level holds it: the key
// must read 0 (API.md: "Min aggregation never under-estimates: Query(k)
// >= the key's true score ..., whatever the clamps, roll-backs, ..."),
// as the mutex reference does.
//
// A TryUpdate(k, -1, 0) decided while the +3 is out, whose commit then
// meets the +3 on a later level, cannot undo its earlier levels (the +3
// wrote them since, and negative deltas are in use, so only an exact
// restore is allowed), re-decides with the +3 in, and is denied. Audit 87
// found its -1 kept in the levels it could not restore: the doc called a
// kept increment an over-estimate, but a kept -1 is an under-estimate;
// levels read -1 for a key whose true score is 0, for good, and
// TryUpdate(k, 1, 0) was then admitted past the limit. Fixed: a negative
// increment is always given back, by CAS or by adding it back
// (core.Sketch.rollback; docs/design.md, "Roll-backs", case 6);
// sketch's TestReplayNegativeDenialGivesBack replays the interleaving
// deterministically.
func TestAudit87SkFixedNegativeDenialLeavesKeyBelowTruth(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs for the race")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(4)
	cfg := func() sketch.Config {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		return sketch.Config{Levels: 8, CellsPerLevel: 64, Lo: -1e6, Hi: 1e6, Clock: clk}
	}
	s, err := sketch.New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	r, err := reference.New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	for _, im := range []struct {
		name   string
		sc     sketch.Scorer
		rounds int
	}{{"sketch", s, testsize.Pick(3000, 300)}, {"reference", r, 30}} {
		for round := range im.rounds {
			var wg sync.WaitGroup
			start := make(chan struct{})
			// Short rounds started together race most at their start.
			wg.Add(4)
			for range 3 {
				go func() {
					defer wg.Done()
					<-start
					for range 200 {
						im.sc.Update(k, 3)
						im.sc.Update(k, -3)
					}
				}()
			}
			for range 1 {
				go func() {
					defer wg.Done()
					<-start
					for range 200 {
						if im.sc.TryUpdate(k, -1, 0) {
							im.sc.Update(k, 1)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			det := im.sc.QueryDetailed(k)
			if det.Score != 0 {
				// The consequence for admission: a true score of 0
				// under a limit of 0 leaves no room for +1.
				over := im.sc.TryUpdate(k, 1, 0)
				t.Fatalf("%s round %d: the quiescent key (true score 0) reads %v; levels %+v: a denied TryUpdate's -1 kept in the levels it could not restore, called an over-estimate; TryUpdate(k, 1, 0) then admitted: %v (true score 1, above the limit 0)",
					im.name, round, det.Score, det.Levels, over)
			}
		}
	}
}
