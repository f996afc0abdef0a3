package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a75eSlot is one ring slot of the float model: generation gen, made or
// last rebased at hw, the key's true score D at time T (exponential law).
type a75eSlot struct {
	ok      bool
	gen     int64
	hw, ep  int64
	D       float64
	T       int64
	lam     float64
	rebased int
}

func (s *a75eSlot) at(tm int64) float64 {
	if tm <= s.T {
		return s.D
	}
	return s.D * math.Exp(-s.lam*float64(tm-s.T)/1000)
}

// TestAudit75RotationExponentialNeverBelow: rotating sketches (G 2..4,
// Exponential, Max and Mean aggregators) rebased every 300 ms by the
// reordered commit, one key alone in its cells, TryUpdate with a clock
// moving forward: the estimate is never below the true score of the
// oldest live generation and within a float32 rounding per write and
// rebase above it; an admission never takes the true score above the
// limit; a denial never comes with the true score clearly below room.
func TestAudit75RotationExponentialNeverBelow(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, G := range []int64{2, 3, 4} {
		for _, agg := range []sketch.Aggregator{sketch.Max, sketch.Mean} {
			t.Run(fmt.Sprintf("G%d/%v", G, agg), func(t *testing.T) {
				const P = 700
				const lam = 0.37
				clk := sketchtest.NewFakeClock()
				c := int64(1_700_000_000_300)
				clk.Set(c)
				s := e.sketch(t, Config{Name: fmt.Sprintf("a75e:%d:%v", G, agg), Levels: 3, CellsPerLevel: 128,
					Decay: decay.Exponential(lam), Lo: 0, Hi: 1e9, Aggregator: agg,
					Period: P * time.Millisecond, Generations: uint32(G), Clock: clk})
				s.setRebaseAt(300)
				slots := make([]a75eSlot, G)
				r := rand.New(rand.NewPCG(uint64(G), 75))
				ctx := context.Background()
				for step := 0; step < 300; step++ {
					c += int64(r.IntN(160))
					clk.Set(c)
					cur := c / P
					var live []*a75eSlot
					for i := cur - G + 1; i <= cur; i++ {
						sl := &slots[((i%G)+G)%G]
						if !(sl.ok && sl.gen == i) {
							*sl = a75eSlot{ok: true, gen: i, hw: c, ep: c, T: c, lam: lam}
						}
						live = append(live, sl)
					}
					truth := live[0].at(c)
					delta := 1 + float64(r.IntN(1000))/7
					limit := 200 + float64(r.IntN(600))
					ok, err := s.TryUpdate(ctx, "k", delta, limit)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						if truth+delta > limit {
							t.Fatalf("step %d: admitted %v with the true score %v, limit %v", step, delta, truth, limit)
						}
						for _, sl := range live {
							if c-sl.ep >= 300 {
								sl.ep, sl.hw = c, c
								sl.rebased++
							}
							sl.D, sl.T = sl.at(c)+delta, c
						}
					} else if truth+delta < limit*(1-1e-4) {
						t.Fatalf("step %d: denied %v with the true score %v, limit %v", step, delta, truth, limit)
					}
					got, err := s.Query(ctx, "k")
					if err != nil {
						t.Fatal(err)
					}
					want := live[0].at(c)
					if got < want || got > want*(1+1e-4)+1e-6 {
						t.Fatalf("step %d at +%d: Query %v; the true score %v (never below, within rounding)", step, c-1_700_000_000_300, got, want)
					}
				}
			})
		}
	}
}
