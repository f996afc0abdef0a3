package sketch_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit37Aggs() []struct {
	name string
	agg  sketch.Aggregator
	fn   func([]float64) float64
} {
	return []struct {
		name string
		agg  sketch.Aggregator
		fn   func([]float64) float64
	}{
		{"Min", sketch.Min, nil},
		{"Max", sketch.Max, nil},
		{"Mean", sketch.Mean, nil},
		{"customMin", 0, func(v []float64) float64 {
			m := math.Inf(1)
			for _, x := range v {
				m = math.Min(m, x)
			}
			return m
		}},
		{"customMax", 0, func(v []float64) float64 {
			m := math.Inf(-1)
			for _, x := range v {
				m = math.Max(m, x)
			}
			return m
		}},
	}
}

// TestAudit37TryUpdateExactCollidingStripes: M=1 (every key in the same
// L cells), keys on distinct stripes, 6 goroutines each TryUpdate-ing its
// own key until denied, while a seventh goroutine runs no-write adds
// (Update and UpdateAndQuery of 0, which must write nothing and change
// no count) on another key: the total admitted is never above the limit;
// with one key (one stripe) it is exactly the limit. Every aggregator
// that is monotone (Min, Max, Mean, custom Min/Max).
func TestAudit37TryUpdateExactCollidingStripes(t *testing.T) {
	const limit = 400
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, a := range audit37Aggs() {
			for _, levels := range []uint32{2, 5} {
				for _, oneKey := range []bool{false, true} {
					name := fmt.Sprintf("%s/L%d/oneKey=%v", a.name, levels, oneKey)
					cfg := sketch.Config{Levels: levels, CellsPerLevel: 1, Hi: 1e6, Aggregator: a.agg, AggregateFunc: a.fn, Clock: sketchtest.NewFakeClock()}
					s := mustNewSketch(t, cfg)
					keys := keysOnDistinctStripes(t, s, 7)
					var admitted atomic.Int64
					var wg sync.WaitGroup
					start := make(chan struct{})
					stop := make(chan struct{})
					var nw sync.WaitGroup
					nw.Go(func() {
						<-start
						for {
							select {
							case <-stop:
								return
							default:
							}
							s.Update(keys[6], 0)
							s.UpdateAndQuery(keys[6], 0)
						}
					})
					for g := range 6 {
						k := keys[g]
						if oneKey {
							k = keys[0]
						}
						wg.Go(func() {
							<-start
							for s.TryUpdate(k, 1, limit) {
								admitted.Add(1)
							}
						})
					}
					close(start)
					wg.Wait()
					close(stop)
					nw.Wait()
					got := admitted.Load()
					q := s.Query(keys[0])
					if got > limit || oneKey && got != limit {
						t.Errorf("%s: admitted %d against limit %d (Query %v): TryUpdate promises exactly the limit on one key and never more with every key colliding (sketch/doc.go)", name, got, limit, q)
					}
					if q != float64(got) {
						t.Errorf("%s: Query = %v after %d admissions of 1 and only zero Updates: a no-write shortcut or roll-back lost or duplicated mass", name, q, got)
					}
				}
			}
		}
	})
}
