package meter_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
)

// TestAudit96MeterInflightHeldNeverUndercounted: Inflight's doc
// (meter/inflight.go:22-25): "Count is an upper bound on the key's true
// in-flight count ... a collision can refuse a key early but never admit
// it past max"; TryAcquire "acquires only if key has fewer than max in
// flight". A key holding 5 guards for the whole run, while goroutines
// churn TryAcquire (admitted or refused, so roll-backs on conflicts),
// Acquire and double Releases on it and on keys sharing its cells (2 x 3
// cells), at GOMAXPROCS 1, 2 and 4: a concurrent reader never sees its
// Count below 5 nor gets a TryAcquire(held, 5); at quiescence every
// Count is back to what is held, then 0.
func TestAudit96MeterInflightHeldNeverUndercounted(t *testing.T) {
	keys := []string{"held", "a", "b", "c", "d"}
	ops := testsize.Pick(3000, 600)
	for _, procs := range []int{1, 2, 4} {
		t.Run(strconv.Itoa(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			in, err := meter.NewInflight(0, meter.WithSize(2, 3), meter.WithSeed(96))
			if err != nil {
				t.Fatal(err)
			}
			var held []*meter.Guard
			for range 5 {
				held = append(held, in.Acquire("held"))
			}
			var stop atomic.Bool
			var bad atomic.Int64
			var readers sync.WaitGroup
			readers.Go(func() {
				for !stop.Load() {
					if in.Count("held") < 5 {
						bad.Add(1)
					}
					if g := in.TryAcquire("held", 5); g != nil {
						bad.Add(1000)
						g.Release()
					}
					runtime.Gosched()
				}
			})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(96, uint64(w)))
					for range ops {
						k := keys[rng.IntN(len(keys))]
						var g *meter.Guard
						if rng.IntN(3) == 0 {
							g = in.Acquire(k)
						} else {
							g = in.TryAcquire(k, 1+rng.IntN(8))
						}
						if rng.IntN(4) == 0 {
							runtime.Gosched()
						}
						g.Release()
						g.Release()
					}
				})
			}
			wg.Wait()
			stop.Store(true)
			readers.Wait()
			if n := bad.Load(); n != 0 {
				t.Errorf("while 5 guards of held were held: %d reads below 5, %d TryAcquire(held, 5) admitted", n%1000, n/1000)
			}
			if c := in.Count("held"); c != 5 {
				t.Errorf("at quiescence: Count(held) %d; want 5", c)
			}
			for _, g := range held {
				g.Release()
			}
			for _, k := range keys {
				if c := in.Count(k); c != 0 {
					t.Errorf("after every release: Count(%q) %d", k, c)
				}
			}
		})
	}
}
