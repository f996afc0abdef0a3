package rotator_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit77ReleaseExactUnderContention: with atom.Release a plain
// store on amd64 (outside -race/purego), racing TryUpdates on a few keys
// of a rotator (no decay, clock stopped, Min and Max) admit exactly limit/delta per key, and a reader
// never sees a primary estimate above the limit or decreasing (a seqlock
// release that lost a commit, or published it late, would show one).
// Run with and without -race (the add and the plain store).
func TestAudit77ReleaseExactUnderContention(t *testing.T) {
	aggs := map[string]sketch.Aggregator{"Min": sketch.Min, "Max": sketch.Max}
	for name, agg := range aggs {
		t.Run(name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				const G, K, limit = 6, 3, 3000
				for round := range 3 {
					clk := sketchtest.NewFakeClock()
					r, err := rotator.New(rotator.Config{
						Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 1024, Hi: 1e9, Aggregator: agg, Seed: uint64(round), Clock: clk},
						Generations: 3, Period: time.Hour,
					})
					if err != nil {
						t.Fatal(err)
					}
					var got [K]atomic.Int64
					var stop atomic.Bool
					var wg sync.WaitGroup
					var bad atomic.Value
					wg.Go(func() {
						var last [K]float64
						for !stop.Load() {
							for k := range K {
								v := r.QueryString(fmt.Sprint("key", k))
								if v > limit || v < last[k] {
									bad.Store(fmt.Sprintf("key%d read %v after %v (limit %d)", k, v, last[k], limit))
								}
								last[k] = v
							}
						}
					})
					var writers sync.WaitGroup
					for g := range G {
						writers.Go(func() {
							k := g % K
							key := fmt.Sprint("key", k)
							for r.TryUpdateString(key, 1, limit) {
								got[k].Add(1)
							}
						})
					}
					writers.Wait()
					stop.Store(true)
					wg.Wait()
					if b := bad.Load(); b != nil {
						t.Fatalf("round %d: %v", round, b)
					}
					for k := range K {
						if n := got[k].Load(); n != limit {
							t.Fatalf("round %d: key%d admitted %d, want exactly %d (TryUpdate: the check and the write are one atomic step)", round, k, n, limit)
						}
					}
				}
			})
		})
	}
}
