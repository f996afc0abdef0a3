package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit101BucketCrowdFrozenNeverOverAdmits: doc.go, Guarantees:
// "TryUpdate is exact for one key under contention ... Across keys it
// never over-admits", and "One-sided: Query(k) >= k's true load, whatever
// evictions, floors, fingerprint collisions, decay, refunds and races".
// An exact oracle: time frozen (no drain), an engine of 2 lines (28
// slots) and 40 keys, so that the table is past full and every key lives
// by evictions and inherited floors; G goroutines (G = GOMAXPROCS 1..8)
// race TryReserve(k, n in 1..3, limit 20), Refund of about a third of
// their receipts, and Update(k, 1) (a RejectCost) on random keys. For
// every key, the tokens admitted less the refunds that reported true
// plus the Updates must be at most 20 + (the Updates, which are not
// limited): admitted - refunded <= 20 for keys never Updated; and a
// final Query reads at least what every key holds. Passes.
func TestAudit101BucketCrowdFrozenNeverOverAdmits(t *testing.T) {
	const keys, limit = 40, 20
	ops := 1500
	if testing.Short() {
		ops = 300
	}
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			e, err := bucket.New(bucket.Config{Lines: 2, Law: bucket.Linear(10, 40), Clock: clk, SeedSet: true, Seed: uint64(procs)})
			if err != nil {
				t.Fatal(err)
			}
			var held [keys]atomic.Int64   // admitted - refunded, tokens
			var updated [keys]atomic.Bool // keys that took an Update
			var wg sync.WaitGroup
			for g := range procs {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), uint64(procs)))
					for range ops {
						k := r.IntN(keys)
						key := fmt.Sprint("k", k)
						switch x := r.IntN(10); {
						case x == 0 && k%4 == 0:
							updated[k].Store(true)
							e.Update(key, 1)
						default:
							n := 1 + r.IntN(3)
							rc, ok := e.TryReserve(key, float64(n), limit)
							if !ok {
								continue
							}
							held[k].Add(int64(n))
							if r.IntN(3) == 0 {
								runtime.Gosched()
								if e.Refund(&rc) {
									held[k].Add(-int64(n))
								}
							}
						}
					}
				})
			}
			wg.Wait()
			for k := range keys {
				h := held[k].Load()
				if !updated[k].Load() && h > limit {
					t.Errorf("key k%d holds %d tokens admitted (net of refunds) against a limit of %d, time frozen", k, h, limit)
				}
				if q := e.Query(fmt.Sprint("k", k)); !updated[k].Load() && q < float64(min(h, 40)) {
					t.Errorf("key k%d reads %v, below the %d tokens it holds", k, q, h)
				}
			}
		})
	}
}
