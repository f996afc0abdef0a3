package redis

// Audit 89: the Limiter against an exact model of its count-min, cell by
// cell, where keys share some of their cells (L 3 x M 5, a dozen keys):
// doc.go's Model (each call decays the key's L cells on the server's
// clock, aggregates them with Min, and on an admission adds n to every
// cell, clamped at Hi) in the exact units Limiter chooses (limiter.go,
// Limiter: whole units drained each ms, Burst within 2^24 of them, so
// every cell is an integer and every decision, RetryAfter and ResetAfter
// the model's to the ms). The model places keys with the client's own
// placement (the hasher and core.Index).

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit89Cell is one cell's debt in units, as of ms at.
type audit89Cell struct{ debt, at int64 }

func TestAudit89RedisCountMinCellModel(t *testing.T) {
	const levels, cells = 3, 5
	forEachClient(t, func(t *testing.T, e *env) {
		for li, lim := range []Limit{PerSecond(10, 7), PerSecond(3, 5), PerSecond(1000.0/7, 20), PerSecond(5001, 1000), PerSecond(1000.0/3600, 9)} {
			t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
				unit, drain, exact, _ := units.Units(lim.Rate, lim.Burst)
				if !exact {
					t.Fatalf("setup: %+v not exact", lim)
				}
				perMs, burstU := int64(drain), int64(lim.Burst*unit)
				clk := sketchtest.NewFakeClock()
				clk.Set(1_800_000_000_000)
				l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a89cm%d", li), Limit: lim, Levels: levels, CellsPerLevel: cells, Clock: clk})
				model := make([]audit89Cell, levels*cells)
				place := func(key string) []int {
					h := l.Sketch().hasher.Sum64String(key)
					idx := make([]int, levels)
					for lv := range idx {
						idx[lv] = lv*cells + int(core.Index(h, uint32(lv), cells))
					}
					return idx
				}
				value := func(c audit89Cell, now int64) int64 { return max(c.debt-perMs*(now-c.at), 0) }
				ceilDiv := func(a, b int64) int64 { return (a + b - 1) / b }
				est := func(idx []int, now int64) int64 {
					m := int64(math.MaxInt64)
					for _, i := range idx {
						m = min(m, value(model[i], now))
					}
					return min(m, burstU)
				}
				rng := rand.New(rand.NewPCG(uint64(li), 89))
				ctx := context.Background()
				full := 1000 * lim.Burst / lim.Rate
				denials, partial := 0, 0
				for i := range 12 {
					for j := range i {
						same := 0
						for lv, c := range place(fmt.Sprintf("key%d", i)) {
							if place(fmt.Sprintf("key%d", j))[lv] == c {
								same++
							}
						}
						if same > 0 && same < levels {
							partial++
						}
					}
				}
				if partial == 0 {
					t.Fatal("setup: no two keys share some but not all of their cells")
				}
				for step := range 250 {
					switch rng.IntN(4) {
					case 1:
						clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
					case 2:
						clk.Advance(time.Duration(rng.Float64()*full/20) * time.Millisecond)
					}
					key := fmt.Sprintf("key%d", rng.IntN(12))
					n := float64(1 + rng.IntN(max(3, int(lim.Burst)/3)))
					if rng.IntN(8) == 0 {
						n = lim.Burst + float64(rng.IntN(2))
					}
					now := clk.NowMillis()
					idx := place(key)
					nU := int64(n * unit)
					before := est(idx, now)
					wantOK := n <= lim.Burst && before+nU <= burstU
					after := before
					if wantOK {
						for _, i := range idx {
							model[i] = audit89Cell{debt: min(value(model[i], now)+nU, burstU), at: now}
						}
						after = est(idx, now)
					}
					if !wantOK && n <= lim.Burst {
						denials++
					}
					wantRetry := time.Duration(-1)
					if !wantOK && n <= lim.Burst {
						wantRetry = time.Duration(ceilDiv(before+nU-burstU, perMs)) * time.Millisecond
					}
					wantReset := time.Duration(ceilDiv(after, perMs)) * time.Millisecond
					wantRemaining := float64(burstU-after) / unit
					d, err := l.AllowN(ctx, key, n)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed != wantOK || d.RetryAfter != wantRetry || d.ResetAfter != wantReset || d.Remaining != wantRemaining {
						t.Fatalf("step %d (t+%d ms, %s cells %v, n %v): %+v; model allowed %v retry %v reset %v remaining %v (debt %d of %d units before)",
							step, now-1_800_000_000_000, key, idx, n, d, wantOK, wantRetry, wantReset, wantRemaining, before, burstU)
					}
				}
				if denials < 10 {
					t.Fatalf("setup: only %d denials in 250 steps", denials)
				}
			})
		}
	})
}
