package bucket_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit101BucketDocumentedEvictionAllocatesOnSweep (audit 101;
// documented at stop 60, the text below says what was wrong; engine.go
// and limit.Allow now state the one 16-byte allocation per sweep, which
// the test bounds): engine.go, Engine: "An
// Engine is safe for concurrent use ...; it takes no lock, starts no
// goroutine, and its operations do not allocate"; doc.go, Guarantees:
// "Lock-free: 64-bit loads and CAS on the line's words, no lock, no
// goroutine, no allocation." An eviction whose floor lies 2^28 histogram
// epochs past the last sweep runs a sweep (floors.go, floorHist.add),
// and publishing it allocates a *sweepPlan (np := &sweepPlan{...}). For
// limit.New(10, 20)'s law (Linear(10, 40), 469 ticks an epoch, 15 a ms)
// that is the first eviction after every 97 days of engine time (2.2
// hours at 16,384 ticks a ms), and the first eviction after any restore
// (ReadFrom resets last to 0). Repro: on a 2-line engine, each round
// moves the fake clock 120 days and fills the two lines past full with
// TryUpdate: every round allocates (TestZeroAllocs never crosses the
// horizon).
//
// Fix: internal/bucket/floors.go, floorHist: keep the plan in the
// histogram by value (two atomic words, base and target, with a sequence
// number, or a small fixed ring of preallocated plans CASed by index)
// instead of a heap pointer; or state the allocation in the godoc.
func TestAudit101BucketDocumentedEvictionAllocatesOnSweep(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e, err := bucket.New(bucket.Config{Lines: 2, Law: bucket.Linear(10, 40), Clock: clk, SeedSet: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	round := func() {
		clk.Advance(120 * 24 * time.Hour)
		for _, k := range keys {
			e.TryUpdate(k, 20, 20)
		}
	}
	// A control: the same rounds a minute apart never allocate.
	ctl := func() {
		clk.Advance(time.Minute)
		for _, k := range keys {
			e.TryUpdate(k, 20, 20)
		}
	}
	if a := testing.AllocsPerRun(5, ctl); a != 0 {
		t.Fatalf("control rounds allocate %v", a)
	}
	if sat := e.Saturation(1, 20); sat < 0.5 {
		t.Fatalf("setup: the lines hold no denying floor (Saturation %v)", sat)
	}
	if a := testing.AllocsPerRun(5, round); a > 1 {
		t.Errorf("a round of TryUpdates whose evictions cross a sweep horizon allocates %v times; documented: one sweep plan", a)
	}
}
