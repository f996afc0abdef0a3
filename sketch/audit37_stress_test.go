package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit37Op struct {
	at int64
	d  float64
}

// TestAudit37ConcurrentOwnTruth: goroutines each own two keys (all keys
// on distinct stripes, every key in the same 1 or 2 cells per level),
// and write them with TryUpdateAt (limits near the estimate, so many
// denials and commit conflicts with roll-backs), UpdateAt and
// UpdateAndQueryAt, at explicit times that each goroutine advances on its
// own (so the goroutines' times interleave out of order), with Hi low
// enough that cells sit at the clamp (the no-write shortcut) and deltas
// of 0 mixed in. Afterwards every key's estimate is at least its own
// truth: its own admitted history replayed alone through the reference
// (Min, non-negative deltas: sketch/doc.go "Never below the truth ...
// whatever the collisions, clamps, roll-backs").
func TestAudit37ConcurrentOwnTruth(t *testing.T) {
	laws := []struct {
		name string
		law  decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(1)}, {"linear", decay.Linear(5)}}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, lw := range laws {
			for _, m := range []uint32{1, 2} {
				for _, levels := range []uint32{2, 4} {
					name := fmt.Sprintf("%s/M%d/L%d", lw.name, m, levels)
					clk := sketchtest.NewFakeClock()
					const base = 50_000_000
					clk.Set(base + 10_000)
					cfg := sketch.Config{Levels: levels, CellsPerLevel: m, Decay: lw.law, Hi: 40, Clock: clk}
					s := mustNewSketch(t, cfg)
					const G = 4
					keys := keysOnDistinctStripes(t, s, 2*G)
					hist := make([][]audit37Op, len(keys))
					var wg sync.WaitGroup
					for g := range G {
						wg.Go(func() {
							rng := rand.New(rand.NewPCG(uint64(g), 37))
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
									s.UpdateAt(tt, string(k), d)
								case 1:
									s.UpdateAndQueryAt(tt, string(k), d)
								default:
									lim := s.QueryAt(tt, string(k)) + d + float64(rng.IntN(3)) - 1
									if !s.TryUpdateAt(tt, string(k), d, lim) {
										continue
									}
								}
								hist[ki] = append(hist[ki], audit37Op{at, d})
							}
						})
					}
					wg.Wait()
					final := time.UnixMilli(base + 10_000)
					for ki, k := range keys {
						rclk := sketchtest.NewFakeClock()
						rclk.Set(base + 10_000)
						r := mustNewReference(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: lw.law, Hi: 40, Clock: rclk})
						for _, op := range hist[ki] {
							r.UpdateAt(time.UnixMilli(op.at), "x", op.d)
						}
						for _, q := range []time.Time{final, final.Add(-9000 * time.Millisecond), final.Add(time.Hour)} {
							want := r.QueryAt(q, "x")
							if q.Before(final) {
								continue
							}
							if got := s.QueryAt(q, string(k)); got < want-1e-9*math.Max(1, want) {
								t.Errorf("%s: key %d (%d ops): Query = %v below its own truth %v", name, ki, len(hist[ki]), got, want)
							}
						}
					}
				}
			}
		}
	})
}
