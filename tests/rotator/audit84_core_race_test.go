package rotator_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84CoreRotatorTryRace: TryUpdate "stays exact across
// promotions": goroutines racing TryUpdate(k, 1, 50) (the short form and
// the At form) while the clock crosses deadlines; no generation ever holds
// more than the limit (each newer generation holds a subset of an older
// one's writes), and the admissions the primary decided never exceed it.
func TestAudit84CoreRotatorTryRace(t *testing.T) {
	const limit = 50
	for _, n := range []uint32{2, 3, 5} {
		clk := sketchtest.NewFakeClock()
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 4, CellsPerLevel: 1, Hi: 1e6, Clock: clk},
			Generations: n, Period: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var over atomic.Int64
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 4000 {
					if g == 0 && i%10 == 0 {
						clk.Advance(time.Millisecond)
					}
					key := []string{"a", "b", "c"}[(g+i)%3] // every key shares the one cell
					if g%2 == 0 {
						r.TryUpdateString(key, 1, limit)
					} else {
						r.TryUpdateAt(clk.Now(), key, 1, limit)
					}
					if q := r.QueryString("a"); q > limit {
						over.Store(int64(q))
					}
				}
			}()
		}
		wg.Wait()
		if v := over.Load(); v != 0 {
			t.Fatalf("N=%d: a reading of %d above the limit %d", n, v, limit)
		}
		for range n {
			if q := r.QueryString("x"); q > limit {
				t.Fatalf("N=%d: a generation holds %v > %d", n, q, limit)
			}
			for r.TryUpdateString("x", 1, limit) {
			}
			if q := r.QueryString("x"); q != limit {
				t.Fatalf("N=%d: topped up to %v; want %d", n, q, limit)
			}
			clk.Advance(10 * time.Millisecond)
		}
	}
}
