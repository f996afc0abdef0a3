package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit50ConcurrentNeverBelowReference races Update, UpdateAndQuery,
// TryUpdate, Query and QueryDetailed on the façade (32 keys in 4 x 16
// cells: heavy collisions) in phases, the grudgetest clock frozen within a
// phase and moved between phases. Every admitted delta is recorded; after
// each phase the float64 mutex reference, built from the façade's own
// config (same seed and hasher: same cells), receives the phase's sums
// (order within one instant does not matter for these laws with no clamp
// reached). Then, cell by cell, the façade is never below the reference
// (one-sided float32 rounding, API.md "never under-estimates") and within
// a float32 rounding slack above it; each Query is >= the exact per-key
// truth. Readers during a phase never see less than what previous phases
// left. Runs at GOMAXPROCS 1, 2, 4, 8 for None, Exponential and Linear.
func TestAudit50ConcurrentNeverBelowReference(t *testing.T) {
	laws := map[string]grudge.Decay{"none": grudge.None, "exp": grudge.Exponential(0.7), "linear": grudge.Linear(3)}
	for name, law := range laws {
		t.Run(name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				a50Differential(t, law)
			})
		})
	}
}

func a50Differential(t *testing.T, law grudge.Decay) {
	const keys, workers, phases, opsPer = 32, 4, 20, 500
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 16, Decay: law, Lo: 0, Hi: 1e7, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reference.New(s.Native().Config())
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
	// truth[k]: the key's own exact score (no collisions), float64.
	truth := make([]float64, keys)
	var lastMs int64
	rng := rand.New(rand.NewPCG(7, uint64(workers)))
	for ph := range phases {
		// Move the clock (whole and sub-ms), then decay the truths.
		d := time.Duration(rng.Int64N(800_000_000)) // up to 0.8 s
		clk.Advance(d)
		now := clk.NowMillis()
		for k := range truth {
			truth[k] = law.Apply(truth[k], now-lastMs)
		}
		lastMs = now
		floor := append([]float64(nil), truth...) // what previous phases left, at now
		var sums [keys]atomic.Int64
		var below atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(ph), uint64(w)))
				for range opsPer {
					k := r.IntN(keys)
					dl := int64(1 + r.IntN(9))
					switch r.IntN(5) {
					case 0:
						s.Update(key(k), float64(dl))
						sums[k].Add(dl)
					case 1:
						if got := s.UpdateAndQuery(key(k), float64(dl)); got < floor[k]+float64(dl)-1e-9*math.Max(1, floor[k]) {
							below.Add(1)
						}
						sums[k].Add(dl)
					case 2:
						if s.TryUpdate(key(k), float64(dl), float64(200+ph*50)) {
							sums[k].Add(dl)
						}
					case 3:
						if got := s.Query(key(k)); got < floor[k]-1e-9*math.Max(1, floor[k]) {
							below.Add(1)
						}
					default:
						if got := s.QueryDetailed(key(k)).Aggregate; got < floor[k]-1e-9*math.Max(1, floor[k]) {
							below.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		if below.Load() != 0 {
			t.Fatalf("phase %d: %d concurrent reads below what earlier phases left", ph, below.Load())
		}
		for k := range keys {
			if n := sums[k].Load(); n != 0 {
				ref.Update(key(k), float64(n))
				truth[k] += float64(n)
			}
		}
		for k := range keys {
			got, want := s.QueryDetailed(key(k)), ref.QueryDetailed(key(k))
			for l, lv := range want.Levels {
				g := got.LevelScores[l]
				if got.CellIndexes[l] != lv.Index {
					t.Fatalf("phase %d key %d level %d: cell %d, reference %d", ph, k, l, got.CellIndexes[l], lv.Index)
				}
				if g < lv.Score*(1-1e-12)-1e-12 {
					t.Fatalf("phase %d key %d level %d: façade cell %v below reference %v", ph, k, l, g, lv.Score)
				}
				// float32 round-up per store: a few ulps of the largest
				// value the cell held, relative.
				if g > lv.Score+1e-5*math.Max(1, lv.Score)+float64(phases)*0x1p-20*math.Max(1, lv.Score) {
					t.Fatalf("phase %d key %d level %d: façade cell %v far above reference %v", ph, k, l, g, lv.Score)
				}
			}
			if q := s.Query(key(k)); q < truth[k]*(1-1e-12)-1e-12 {
				t.Fatalf("phase %d key %d: Query %v below the key's own exact score %v", ph, k, q, truth[k])
			}
		}
	}
}
