package grudge_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge"
)

func auditRace(n int, try func() bool) int64 {
	var admitted atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			for try() {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted.Load()
}

type constHasher struct{}

func (constHasher) Hash64([]byte) uint64 { return 0x0123456789abcdef }

// TestAuditTryUpdateExactCustom: TryUpdate is exact on the slow path too
// (any Aggregator function, including one that reorders its argument),
// and when every key collides at every level through the Hasher (a full
// 64-bit collision) rather than through CellsPerLevel = 1: the total
// admitted over all keys is exactly the limit. GOMAXPROCS 1, 2, 8.
func TestAuditTryUpdateExactCustom(t *testing.T) {
	aggs := []struct {
		name string
		agg  grudge.Aggregator
	}{
		{"first", func(v []float64) float64 { return v[0] }},
		{"sorted-median", func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }},
		{"wrapped-Min", func(v []float64) float64 { return grudge.Min(v) }},
	}
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			for _, a := range aggs {
				s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1e9, CellsPerLevel: 1024, Levels: 5, Aggregator: a.agg})
				if err != nil {
					t.Fatal(err)
				}
				if got := auditRace(16, func() bool { return s.TryUpdate([]byte("k"), 1, 500) }); got != 500 {
					t.Errorf("%s: admitted %d, want exactly 500", a.name, got)
				}
				d := s.QueryDetailed([]byte("k"))
				for l, v := range d.LevelScores {
					if v != 500 {
						t.Errorf("%s: level %d holds %v after the race, want 500", a.name, l, v)
					}
				}
			}
			s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1e9, CellsPerLevel: 1 << 16,
				Hasher: func(uint64) grudge.Hasher { return constHasher{} }})
			if err != nil {
				t.Fatal(err)
			}
			var next atomic.Int64
			if got := auditRace(16, func() bool { return s.TryUpdate([]byte(fmt.Sprint(next.Add(1))), 1, 300) }); got != 300 {
				t.Errorf("all keys colliding through the Hasher: admitted %d, want exactly 300", got)
			}
		})
	}
}
