package sketch_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37MergeConcurrentWithTryUpdates: no decay, frozen clock, M=1
// (every key in the same L cells). Goroutines race TryUpdate on keys of
// distinct stripes (limits that force commit conflicts and roll-backs)
// while another merges a replica holding 4 in every cell, 200 times.
// Every cell must end at exactly (admitted total) + 200*4: roll-backs
// by subtraction after a merge's additive write take back exactly the
// call's increment, and no merge or increment is lost.
func TestAudit37MergeConcurrentWithTryUpdates(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, levels := range []uint32{2, 4} {
			clk := sketchtest.NewFakeClock()
			clk.Set(3_000_000)
			cfg := sketch.Config{Levels: levels, CellsPerLevel: 1, Hi: 1e9, Clock: clk}
			s := mustNewSketch(t, cfg)
			o := mustNewSketch(t, cfg)
			o.UpdateString("y", 4)
			keys := keysOnDistinctStripes(t, s, 4)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			const merges = 200
			wg.Go(func() {
				<-start
				for range merges {
					if err := s.Merge(o); err != nil {
						t.Error(err)
						return
					}
				}
			})
			for g := range 4 {
				wg.Go(func() {
					<-start
					for i := range 600 {
						d := float64(1 + (g+i)%3)
						lim := s.Query(keys[g]) + d + float64(i%2)
						if s.TryUpdate(keys[g], d, lim) {
							admitted.Add(int64(d))
						}
					}
				})
			}
			close(start)
			wg.Wait()
			want := float64(admitted.Load() + merges*4)
			d := s.QueryDetailed(keys[0])
			for _, l := range d.Levels {
				if l.Score != want {
					t.Errorf("L=%d: level %d = %v, want %v (admitted %d + %d merges of 4)", levels, l.Level, l.Score, want, admitted.Load(), merges)
				}
			}
		}
	})
}
