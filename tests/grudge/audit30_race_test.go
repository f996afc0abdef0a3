package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A custom aggregator (second-smallest level) on a ticked rotator: racing
// TryUpdate(k, 1, 300) admit exactly 300 while ticks rotate (Generations 4,
// 2 ticks: the key stays in the primary), at several GOMAXPROCS.
func TestAudit30CustomAggTryUpdateExactAcrossTicks(t *testing.T) {
	second := func(s []float64) float64 {
		a, b := s[0], s[1]
		if b < a {
			a, b = b, a
		}
		for _, v := range s[2:] {
			if v < a {
				a, b = v, a
			} else if v < b {
				b = v
			}
		}
		return b
	}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		tk := grudgetest.NewFakeTicker()
		clk := grudgetest.NewFakeClock()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Hi: 1000, Aggregator: second, Clock: clk},
			Generations: 4, Ticker: tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		k := []byte("hot")
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				for range 100 {
					if r.TryUpdate(k, 1, 300) {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Go(func() {
			<-start
			tk.Tick()
			tk.Tick()
		})
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != 300 {
			t.Errorf("admitted %d, want exactly 300", got)
		}
		if got := r.Query(k); got != 300 {
			t.Errorf("Query = %v, want 300", got)
		}
		if got := r.Rotations(); got != 2 {
			t.Errorf("Rotations = %d, want 2", got)
		}
	})
}
