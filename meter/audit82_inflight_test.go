package meter_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit82InflightRollbacksExact: colliding keys (a tiny sketch),
// goroutines racing TryAcquire and Release (commit conflicts roll back
// on a conserved sketch): the number held never exceeds max per key, and
// once every guard is released every key counts exactly 0.
func TestAudit82InflightRollbacksExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(100, meter.WithSize(3, 4), meter.WithSeed(5))
		if err != nil {
			t.Fatal(err)
		}
		const G, K, max = 8, 10, 3
		var held [K]atomic.Int32
		var wg sync.WaitGroup
		var over atomic.Int32
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var gs []*meter.Guard
				var ks []int
				for i := range 3000 {
					k := (g*5 + i) % K
					if gd := in.TryAcquire(fmt.Sprint("k", k), max); gd != nil {
						if held[k].Add(1) > max {
							over.Add(1)
						}
						gs, ks = append(gs, gd), append(ks, k)
					}
					if len(gs) > 2 || (len(gs) > 0 && i%3 == 0) {
						held[ks[0]].Add(-1)
						gs[0].Release()
						gs, ks = gs[1:], ks[1:]
					}
				}
				for j, gd := range gs {
					held[ks[j]].Add(-1)
					gd.Release()
				}
			}()
		}
		wg.Wait()
		if n := over.Load(); n != 0 {
			t.Errorf("%d acquisitions past max %d", n, max)
		}
		for k := range K {
			if c := in.Count(fmt.Sprint("k", k)); c != 0 {
				t.Errorf("key k%d counts %d after every guard was released, want 0", k, c)
			}
		}
	})
}
