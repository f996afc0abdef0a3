package bucket_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveExponentialIdle: the exponential law (a meter's) with
// fast decays, whose window's slack is about a millisecond
// (Exponential(5000, 1, 0): 8,561 ticks a ms, slack 8,568) or 47 ms
// (Exponential(50, 100, 0): 92 ticks a ms, slack 4,316), so that nearly
// every gap between rounds is a long move. Six keys alone in 2 or 3
// lines; in each round (time frozen) 8 goroutines add to random keys
// (Update, UpdateAt, UpdateAndQueryAt); the loads stay far below Max.
//
// design.md, "Stamps instead of loads": "Decay is then free and exact:
// nothing is rewritten as time passes"; "a line that no one writes keeps
// its old lw, and its entries are read against it, correctly"; and the
// one-sided bound with the exponential law's one exception, the dropped
// remainders below Resolution (DropSlack). Checked: at each round's start
// every key reads its previous reading decayed by exp(-lambda x gap)
// (relative 1e-9; a load decayed near Resolution may read 0); after the
// round, at least its load at the start plus the round's adds (less
// DropSlack), and at most that grown by one tick's rounding per write
// (a write stamps the least tick whose load covers it).
func TestAudit5MoveExponentialIdle(t *testing.T) {
	type cfg struct {
		law  bucket.Law
		add  float64 // the largest add
		gaps []time.Duration
	}
	ms := time.Millisecond
	cfgs := []cfg{
		{bucket.Exponential(5000, 1, 0), 0.01, []time.Duration{1 * ms, 2 * ms, 3 * ms, 5 * ms, 1 * ms, 8 * ms}},
		{bucket.Exponential(50, 100, 0), 1, []time.Duration{30 * ms, 47 * ms, 48 * ms, 100 * ms, 250 * ms, 500 * ms, 46 * ms}},
	}
	a5Procs(t, func(t *testing.T) {
		for ci, c := range cfgs {
			q, err := bucket.QuantumOf(c.law)
			if err != nil {
				t.Fatal(err)
			}
			kappa := c.law.Lambda / (1000 * float64(q.PerMs)) // per tick
			for _, lines := range []int{2, 3} {
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 34)
				seed := uint64(700 + 10*ci + lines)
				e := a5Engine(t, lines, c.law, clk, seed)
				drop := bucket.DropSlack(e)
				eps := c.law.Resolution
				if eps == 0 {
					eps = c.law.Max / (1 << 48)
				}
				keys := a5Keys(e, 6, "exp", map[uint16]bool{})
				load := make([]float64, len(keys)) // the engine's reading at the round's time
				for r := range reps(60, 15) {
					X := clk.Now()
					var bad []string
					for i, k := range keys {
						if v := e.QueryAt(X, k); math.Abs(v-load[i]) > 1e-9*load[i] && !(v == 0 && load[i] < 2*eps) {
							bad = append(bad, fmt.Sprintf("key %d reads %v at the round's start, want its last reading decayed: %v", i, v, load[i]))
						}
					}
					if len(bad) > 0 {
						t.Fatalf("%v lines %d round %d: %s", c.law, lines, r, strings.Join(bad, "; "))
					}
					var mu sync.Mutex
					sum := make([]float64, len(keys))
					cnt := make([]int, len(keys))
					race(8, 1, func(g, _ int) bool {
						rng := rand.New(rand.NewPCG(seed, uint64(r*8+g)))
						for range 6 {
							k := rng.IntN(len(keys))
							n := c.add * float64(1+rng.IntN(4)) / 4
							switch rng.IntN(3) {
							case 0:
								e.Update(keys[k], n)
							case 1:
								e.UpdateAt(X, keys[k], n)
							case 2:
								e.UpdateAndQueryAt(X, keys[k], n)
							}
							mu.Lock()
							sum[k] += n
							cnt[k]++
							mu.Unlock()
						}
						return false
					})
					for i, k := range keys {
						v := e.QueryAt(X, k)
						lo := load[i] + sum[i] - drop - 1e-9*(load[i]+sum[i])
						hi := (load[i]+sum[i])*math.Exp(kappa*float64(cnt[i]+1))*(1+1e-9) + eps*math.Exp(kappa)
						if v < lo || v > hi {
							bad = append(bad, fmt.Sprintf("key %d reads %v after %d adds of %v in all on %v, outside [%v, %v]", i, v, cnt[i], sum[i], load[i], lo, hi))
						}
						load[i] = v
					}
					if len(bad) > 0 {
						t.Fatalf("%v lines %d round %d: %s", c.law, lines, r, strings.Join(bad, "; "))
					}
					gap := c.gaps[r%len(c.gaps)]
					clk.Advance(gap)
					for i := range load {
						load[i] *= math.Exp(-c.law.Lambda * gap.Seconds())
					}
				}
			}
		}
	})
}
