package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit101BucketSentinelUnderFloodMovingClock: doc.go, Guarantees:
// "One-sided: Query(k) >= k's true load, whatever evictions, floors,
// fingerprint collisions, decay, refunds and races; a key at its limit
// is never admitted early." A sentinel key takes MaxDebt (40 tokens of
// Linear(10, 40)) on an engine of 4 lines (56 slots) while G-1 goroutines
// flood it with 300 other keys (TryUpdate at the limit, Update, refunds:
// evictions, floors, long moves) and move the fake clock 1-3 ms at a
// time, across 4.5 s. The checker reads the clock after each Query of
// the sentinel: the Query's time is at most that reading, so the
// sentinel's exact debt there (40 - 10/s x elapsed) is a lower bound the
// reading must meet; and a TryUpdate(sentinel, 1, 20) admitted while the
// exact debt at the clock reading after it was above 19 is an early
// admission. GOMAXPROCS 2 and 4. Passes.
func TestAudit101BucketSentinelUnderFloodMovingClock(t *testing.T) {
	steps := 2000
	if testing.Short() {
		steps = 600
	}
	for _, procs := range []int{2, 4} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(2_000_000)
			e, err := bucket.New(bucket.Config{Lines: 4, Law: bucket.Linear(10, 40), Clock: clk, SeedSet: true, Seed: uint64(40 + procs)})
			if err != nil {
				t.Fatal(err)
			}
			t0 := clk.NowMillis()
			if !e.TryUpdate("sentinel", 40, 40) {
				t.Fatal("sentinel denied")
			}
			// Exact in the engine's own arithmetic: 1,500 ticks a token, 15 a ms.
			truth := func(ms int64) float64 { return float64(max(0, 60000-15*(ms-t0))) / 1500 }
			keys := make([]string, 300)
			for i := range keys {
				keys[i] = fmt.Sprint("f", i)
			}
			var done atomic.Bool
			var wg sync.WaitGroup
			for g := range procs - 1 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 9))
					for i := 0; !done.Load(); i++ {
						k := keys[r.IntN(len(keys))]
						switch r.IntN(8) {
						case 0:
							e.Update(k, float64(1+r.IntN(5)))
						case 1:
							if rc, ok := e.TryReserve(k, 3, 20); ok {
								e.Refund(&rc)
							}
						default:
							e.TryUpdate(k, 20, 20)
						}
						if i%3 == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			wg.Go(func() {
				defer done.Store(true)
				r := rand.New(rand.NewPCG(7, 7))
				for range steps {
					clk.Advance(time.Duration(1+r.IntN(3)) * time.Millisecond)
					q := e.Query("sentinel")
					if after := clk.NowMillis(); q < truth(after) {
						t.Errorf("sentinel reads %v at or before %d ms after its take, its true debt there is %v", q, after-t0, truth(after))
						return
					}
					if e.TryUpdate("sentinel", 1, 20) {
						if after := clk.NowMillis(); truth(after) > 19 {
							t.Errorf("sentinel admitted at or before %d ms, its true debt %v > 19", after-t0, truth(after))
							return
						}
						t.Logf("sentinel admitted at %d ms (true debt %v)", clk.NowMillis()-t0, truth(clk.NowMillis()))
						return // admitted in time: its debt is no longer exact
					}
					runtime.Gosched()
				}
			})
			wg.Wait()
		})
	}
}
