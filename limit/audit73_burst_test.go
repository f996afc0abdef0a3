package limit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit73BurstExact: with the clock stopped, G goroutines racing
// Allow on one key (and on several keys at once) are admitted exactly
// burst times per key, in the default (rotator) limiter and with
// conservative update: the stripe's release (atom.Release, a plain store
// on amd64 without -race/purego) neither loses an admission nor lets
// one through twice. Run it with and without -race and with -tags purego.
func TestAudit73BurstExact(t *testing.T) {
	for _, cu := range []bool{false, true} {
		t.Run(fmt.Sprintf("cu=%v", cu), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				const G, burst, K = 6, 400, 3
				for round := range 8 {
					clk := limittest.NewFakeClock()
					l, err := limit.New(1, burst, limit.WithClock(clk), limit.WithConservativeUpdate(cu), limit.WithSeed(uint64(round)))
					if err != nil {
						t.Fatal(err)
					}
					var got [K]atomic.Int64
					gate := make(chan struct{})
					var wg sync.WaitGroup
					for g := range G {
						wg.Go(func() {
							<-gate
							k := g % K
							key := fmt.Sprintf("client-%d", k)
							for l.Allow(key) {
								got[k].Add(1)
							}
						})
					}
					close(gate)
					wg.Wait()
					for k := range K {
						if n := got[k].Load(); n != burst {
							t.Fatalf("round %d: key %d admitted %d, want burst %d (limit.New: \"admitting, per key, burst requests at once\")", round, k, n, burst)
						}
					}
				}
			})
		})
	}
}
