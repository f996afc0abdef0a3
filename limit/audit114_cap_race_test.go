package limit_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit114CrowdedRaceNeverOverAdmits: limit/doc.go, "Exactness":
// "Under contention on one key, strict decisions never admit past the
// burst on either engine"; "Error side": "a collision can only deny a key
// early, never admit it past its own limit"; Reservation.Cancel: "a key
// is never given back more than its own reservation". A limiter of 2
// lines (WithCapacity(1, 0.5): 28 slots) holds 48 keys (every key lives
// by evictions and floors) through a limiter, a Tier of half its rate
// (cost 2 tokens of New's, burst 10 of its own) and a Multi of the
// limiter and a second such limiter, with the clock frozen (nothing
// drains): G goroutines (GOMAXPROCS 1, 2, 4, 8) race AllowN, Tier.AllowN,
// ReserveN (a third cancelled at once) and Multi.AllowN of 1-3 tokens on
// random keys. Per key, in New's tokens: admitted (AllowN, Reserve OK,
// Tier x 2, Multi) less cancelled must stay within the burst, 20, since
// a cancel gives back at most its own; and the Multi's second window
// likewise. Passes.
func TestAudit114CrowdedRaceNeverOverAdmits(t *testing.T) {
	const keys = 48
	ops := testsize.Sample(2000, 600, 200)
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, procs := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprint(eng, "/P", procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(10_000_000)
				opts := []limit.Option{limit.WithClock(clk), limit.WithEngine(eng), limit.WithCapacity(1, 0.5)}
				a := limit.MustNew(10, 20, append(opts, limit.WithSeed(uint64(procs)))...)
				b := limit.MustNew(10, 20, append(opts, limit.WithSeed(uint64(procs)+100))...)
				tier, err := a.Tier("half", 5, 10)
				if err != nil {
					t.Fatal(err)
				}
				m, err := limit.NewMulti(a, b)
				if err != nil {
					t.Fatal(err)
				}
				now := clk.Now()
				var held, heldB [keys]atomic.Int64 // New's tokens admitted less cancelled
				var wg sync.WaitGroup
				for g := range procs {
					wg.Go(func() {
						r := rand.New(rand.NewPCG(uint64(g), uint64(procs)))
						for range ops {
							k := r.IntN(keys)
							key := fmt.Sprint("k", k)
							n := 1 + r.IntN(3)
							switch r.IntN(4) {
							case 0:
								if a.AllowN(now, key, n) {
									held[k].Add(int64(n))
								}
							case 1:
								if tier.AllowN(now, key, n) {
									held[k].Add(int64(2 * n))
								}
							case 2:
								rv := a.ReserveN(now, key, n)
								if rv.OK() && rv.DelayFrom(now) == 0 {
									held[k].Add(int64(n))
									if r.IntN(3) == 0 {
										rv.Cancel()
										held[k].Add(-int64(n))
									}
								} else if rv.OK() {
									rv.Cancel() // queued past the burst: not an admission
								}
							case 3:
								if m.AllowN(now, key, n) {
									held[k].Add(int64(n))
									heldB[k].Add(int64(n))
								}
							}
						}
					})
				}
				wg.Wait()
				for k := range keys {
					if h := held[k].Load(); h > 20 {
						t.Errorf("key %d: %d tokens admitted (less cancels) at one instant; burst 20", k, h)
					}
					if h := heldB[k].Load(); h > 20 {
						t.Errorf("key %d: window b admitted %d tokens; burst 20", k, h)
					}
				}
			})
		}
	}
}
