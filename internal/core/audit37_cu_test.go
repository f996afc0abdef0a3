package core_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37ConservativeConcurrentOwnTruth: a conservative sketch
// (Config.Conservative), 4 goroutines each writing two keys of its own
// (TryUpdateAt with limits near the estimate, UpdateAt,
// UpdateAndQueryAt; deltas 0, 0.25, 1, 2, 3) at explicit times that
// interleave out of order, every key in 1 or 2 cells per level, Hi = 40
// (cells at the clamp), None, Exponential and Linear: every key's final
// estimate is at least its own admitted history replayed alone through
// the reference ("every cell of a key is at least its true score",
// conservative.go). And TryUpdate(k, 1, 300) from 6 goroutines on one key
// with no other writer admits exactly 300.
func TestAudit37ConservativeConcurrentOwnTruth(t *testing.T) {
	laws := []decay.Decay{decay.None(), decay.Exponential(1), decay.Linear(5)}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for li, law := range laws {
			for _, m := range []uint32{1, 2} {
				const base = 70_000_000
				clk := sketchtest.NewFakeClock()
				clk.Set(base + 10_000)
				s, err := core.New(core.Config{Levels: 3, CellsPerLevel: m, Decay: law, Hi: 40, Seed: 3, Conservative: true, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				type op struct {
					at int64
					d  float64
				}
				keys := make([]string, 8)
				for i := range keys {
					keys[i] = fmt.Sprintf("cu-%d", i)
				}
				hist := make([][]op, len(keys))
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 99))
						at := int64(base)
						for range 400 {
							at += int64(rng.IntN(4))
							ki := 2*g + rng.IntN(2)
							k := keys[ki]
							d := float64(rng.IntN(4))
							if rng.IntN(5) == 0 {
								d = 0.25
							}
							tt := time.UnixMilli(at)
							switch rng.IntN(4) {
							case 0:
								s.UpdateStringAt(tt, k, d)
							case 1:
								s.UpdateAndQueryStringAt(tt, k, d)
							default:
								lim := s.QueryStringAt(tt, k) + d + float64(rng.IntN(3)) - 1
								if !s.TryUpdateStringAt(tt, k, d, lim) {
									continue
								}
							}
							hist[ki] = append(hist[ki], op{at, d})
						}
					})
				}
				wg.Wait()
				final := time.UnixMilli(base + 10_000)
				for ki, k := range keys {
					rclk := sketchtest.NewFakeClock()
					rclk.Set(base + 10_000)
					r, err := reference.New(sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: law, Hi: 40, Clock: rclk})
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range hist[ki] {
						r.UpdateAt(time.UnixMilli(o.at), "x", o.d)
					}
					for _, q := range []time.Time{final, final.Add(time.Hour)} {
						want := r.QueryAt(q, "x")
						if got := s.QueryStringAt(q, k); got < want-1e-9*math.Max(1, want) {
							t.Errorf("law %d M=%d: key %s (%d ops): Query = %v below its own truth %v", li, m, k, len(hist[ki]), got, want)
						}
					}
				}
			}
		}
		// Exact count on one key.
		s, err := core.New(core.Config{Levels: 4, CellsPerLevel: 8, Hi: 1e6, Seed: 3, Conservative: true, Clock: sketchtest.NewFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		n := 0
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for s.TryUpdateString("k", 1, 300) {
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if n != 300 || s.QueryString("k") != 300 {
			t.Errorf("conservative: admitted %d, Query %v; want exactly 300", n, s.QueryString("k"))
		}
	})
}
