package bucket

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31SnapshotInsideSealingMove: a snapshot taken from inside a
// long move (beforeMove: before the move's k-th header CAS, so with the
// moving bit set and some steps and seals done) restores to an engine in
// which every key reads exactly its true load, and keeps doing so after
// further writes and long moves on the restored engine. Linear(1000,
// 60) (one token a ms, slack 4 ms), 2 lines, 12 keys of loads 3..47
// tokens (free slots left, so seals change empty versions; the snapshot
// writes empties as 0). Promises: snapshot.go ("A line saved while a
// long move of its lw was on keeps its moving bit; the first writer after
// the restore finishes that move"; "every key's restored load is at
// least its load when its lines were read"), c761bf5 ("Snapshots write
// empty slots as 0").
func TestAudit31SnapshotInsideSealingMove(t *testing.T) {
	// setup builds the engine of a case: 12 keys of distinct
	// fingerprints written at t0, a mover key of another one, the clock
	// gap ms on.
	setup := func(t *testing.T, gap int64) (*Engine, *sketchtest.FakeClock, map[string]float64, string) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := newTest(t, 2, Linear(1000, 60), clk)
		load := map[string]float64{}
		seen := map[uint16]bool{}
		for i := 0; len(load) < 12; i++ {
			k := fmt.Sprintf("s%d", i)
			_, _, fp := e.Locate(k)
			if seen[fp] {
				continue
			}
			seen[fp] = true
			n := float64(3 + 4*len(load))
			e.Update(k, n)
			load[k] = n
		}
		var mover string
		for i := 0; ; i++ {
			mover = fmt.Sprintf("m%d", i)
			if _, _, fp := e.Locate(mover); !seen[fp] {
				break
			}
		}
		clk.Advance(time.Duration(gap) * time.Millisecond)
		return e, clk, load, mover
	}
	for _, gap := range []int64{2, 5, 9, 20, 44} {
		// The number of header CASes the mover's move makes at this gap:
		// a snapshot is taken before each of them in turn.
		cases := 0
		{
			e, _, _, mover := setup(t, gap)
			e.setHooks(&testHooks{beforeMove: func(uint64) { cases++ }})
			e.Update(mover, 1)
		}
		if cases == 0 {
			t.Fatalf("gap %d ms: the mover's write made no move", gap)
		}
		for at := 1; at <= min(cases, 5); at++ {
			t.Run(fmt.Sprintf("gap%d/cas%d", gap, at), func(t *testing.T) {
				e, clk, load, mover := setup(t, gap)
				var snap bytes.Buffer
				calls := 0
				e.setHooks(&testHooks{beforeMove: func(uint64) {
					calls++
					if calls == at {
						if _, err := e.WriteTo(&snap); err != nil {
							t.Errorf("WriteTo: %v", err)
						}
					}
				}})
				e.Update(mover, 1)
				e.setHooks(nil)
				if snap.Len() == 0 {
					t.Fatalf("the move made %d header CASes this time, %d before", calls, cases)
				}
				e2 := newTest(t, 2, Linear(1000, 60), clk)
				if _, err := e2.ReadFrom(bytes.NewReader(snap.Bytes())); err != nil {
					t.Fatalf("ReadFrom: %v", err)
				}
				elapsed := float64(gap)
				check := func(when string, en *Engine, elapsed float64) {
					for k, n := range load {
						want := math.Max(n-elapsed, 0)
						if got := en.Query(k); math.Abs(got-want) > 1e-9 {
							t.Errorf("%s: %s reads %v, want its true load %v", when, k, got, want)
						}
					}
				}
				check("restored", e2, elapsed)
				if m := e2.Query(mover); m > 1+1e-9 {
					t.Errorf("restored: the mover's key reads %v, more than its write of 1", m)
				}
				// More traffic on the restored engine: the move finishes,
				// time moves past the slack twice.
				for _, more := range []int64{0, 3, 11} {
					clk.Advance(time.Duration(more) * time.Millisecond)
					elapsed += float64(more)
					e2.Update(mover, 1)
					check(fmt.Sprintf("restored, +%d ms", more), e2, elapsed)
				}
			})
		}
	}
}
