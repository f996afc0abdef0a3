package core_test

import (
	"fmt"
	"math"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit82Ceil32 is the least float32 at or above the exact a + b.
func audit82Ceil32(a, b float64) float64 {
	x := new(big.Float).SetPrec(2200).SetFloat64(a)
	x.Add(x, new(big.Float).SetPrec(2200).SetFloat64(b))
	f, _ := x.Float32()
	if new(big.Float).SetFloat64(float64(f)).Cmp(x) < 0 {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return float64(f)
}

// audit82SeqAdmits is the sequential oracle of TryUpdate(k, d, limit)
// repeated on one key: admitted while x + d <= limit in float64, each
// admission storing the least float32 at or above the exact x + d.
func audit82SeqAdmits(d, limit float64) int {
	x, n := 0.0, 0
	for x+d <= limit {
		x = audit82Ceil32(x, d)
		n++
	}
	return n
}

// TestAudit82RacingTryUpdateExactCount: 8 goroutines racing TryUpdate(k,
// d, limit) on one key, no decay, admit exactly what the sequential
// decision admits (sketch/doc.go: "N goroutines racing TryUpdate(k, 1,
// 1000) with no decay admit exactly 1000"), for d = 1 and fractional d,
// plain, conservative and conserved sketches, at GOMAXPROCS 1, 2, 4, 8.
func TestAudit82RacingTryUpdateExactCount(t *testing.T) {
	type tc struct{ d, limit float64 }
	cases := []tc{{1, 1000}, {0.1, 100}, {0.3, 200}, {1e-3, 1}}
	for _, c := range cases {
		want := audit82SeqAdmits(c.d, c.limit)
		if c.d == 1 && want != 1000 {
			t.Fatalf("oracle: %d", want)
		}
		for _, mode := range []string{"plain", "conservative", "conserved"} {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(5_000_000)
				s, err := core.New(core.Config{Levels: 4, CellsPerLevel: 256, Hi: 1e9, Seed: 82, Clock: clk, Conservative: mode == "conservative"})
				if err != nil {
					t.Fatal(err)
				}
				if mode == "conserved" {
					s.SetConserved()
				}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				per := want/8 + 50
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							if s.TryUpdateString("k", c.d, c.limit) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if got := admitted.Load(); got != int64(want) {
					t.Errorf("%s: 8 goroutines TryUpdate(k, %v, %v): admitted %d, sequential decision admits %d (query %v)", mode, c.d, c.limit, got, want, s.QueryString("k"))
				}
			})
		}
	}
}

// TestAudit82CollidingFractionalNeverBelowExact: colliding keys (M = 3),
// racing TryUpdates and Updates of fractional and tiny deltas (so that
// commits conflict and roll back), plain, conservative and conserved: at
// the end every key's Min estimate is at least the exact (big.Float) sum
// of its admitted and updated deltas.
func TestAudit82CollidingFractionalNeverBelowExact(t *testing.T) {
	deltas := []float64{0.1, 1, 1e-3, 3.7, 1e-9}
	for _, mode := range []string{"plain", "conservative", "conserved"} {
		sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 3, Hi: 1e12, Seed: 7, Clock: clk, Conservative: mode == "conservative"})
			if err != nil {
				t.Fatal(err)
			}
			if mode == "conserved" {
				s.SetConserved()
			}
			const G, K = 6, 12
			sums := make([][]float64, G) // per goroutine, per key: admitted deltas (exact in big below)
			var wg sync.WaitGroup
			for g := range G {
				sums[g] = make([]float64, 0)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []float64
					for i := range 3000 {
						k := (g*7 + i) % K
						d := deltas[(g+i)%len(deltas)]
						key := fmt.Sprint("k", k)
						if i%3 == 0 {
							s.UpdateString(key, d)
							mine = append(mine, float64(k), d)
						} else if s.TryUpdateString(key, d, 1e6) {
							mine = append(mine, float64(k), d)
						}
					}
					sums[g] = mine
				}()
			}
			wg.Wait()
			exact := make([]*big.Float, K)
			for k := range exact {
				exact[k] = new(big.Float).SetPrec(3000)
			}
			for _, m := range sums {
				for i := 0; i < len(m); i += 2 {
					exact[int(m[i])].Add(exact[int(m[i])], new(big.Float).SetFloat64(m[i+1]))
				}
			}
			for k := range K {
				got := s.QueryString(fmt.Sprint("k", k))
				if new(big.Float).SetFloat64(got).Cmp(exact[k]) < 0 {
					t.Errorf("%s: key k%d: estimate %v below the exact sum of its increments %v", mode, k, got, exact[k].Text('g', 20))
				}
			}
		})
	}
}

// TestAudit82ConservedRollbackIntegersExact: a conserved sketch (as
// meter.Inflight), colliding keys, racing TryUpdate(k, 1, max) and, for
// each admission, a later Update(k, -1): once every increment is taken
// back every key reads exactly 0 (tryupdate.go SetConserved: "exactly
// while the cell is an integer below 2^24").
func TestAudit82ConservedRollbackIntegersExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(5_000_000)
		s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 4, Hi: math.MaxFloat32, Seed: 11, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		s.SetConserved()
		const G, K = 8, 10
		var wg sync.WaitGroup
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held []string
				for i := range 4000 {
					key := fmt.Sprint("k", (g*3+i)%K)
					if s.TryUpdateString(key, 1, 5) {
						held = append(held, key)
					}
					if len(held) > 3 || (len(held) > 0 && i%2 == 0) {
						s.UpdateString(held[0], -1)
						held = held[1:]
					}
				}
				for _, k := range held {
					s.UpdateString(k, -1)
				}
			}()
		}
		wg.Wait()
		for k := range K {
			if got := s.QueryString(fmt.Sprint("k", k)); got != 0 {
				t.Errorf("key k%d reads %v after every increment was taken back, want exactly 0", k, got)
			}
		}
	})
}

// TestAudit82MergeAndConservativeTinyExact: merge of a huge cell and a
// tiny one, and the conservative update of a tiny delta onto a huge
// estimate, are never below the exact sum and at most one float32 above.
func TestAudit82MergeAndConservativeTinyExact(t *testing.T) {
	for _, law := range []decay.Decay{decay.None()} {
		clk := sketchtest.NewFakeClock()
		clk.Set(5_000_000)
		cfg := core.Config{Levels: 2, CellsPerLevel: 64, Hi: math.MaxFloat32, Seed: 1, Clock: clk, Decay: law}
		a, _ := core.New(cfg)
		b, _ := core.New(cfg)
		a.UpdateString("k", 0x1p100)
		b.UpdateString("k", 1)
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
		want := audit82Ceil32(0x1p100, 1)
		if got := a.QueryString("k"); got != want {
			t.Errorf("merge 2^100 + 1: %v, want %v (the least float32 at or above the exact sum)", got, want)
		}
		cfg.Conservative = true
		c, _ := core.New(cfg)
		c.UpdateString("k", 0x1p100)
		x := 0x1p100
		for range 100 {
			c.UpdateString("k", 1)
			x = audit82Ceil32(x, 1)
		}
		if got := c.QueryString("k"); got != x {
			t.Errorf("conservative 2^100 then +1 x100: %v, want %v", got, x)
		}
		if !c.TryUpdateString("k", 1, math.MaxFloat64) {
			t.Fatal("denied")
		}
		x = audit82Ceil32(x, 1)
		if got := c.QueryString("k"); got != x {
			t.Errorf("conservative TryUpdate +1: %v, want %v", got, x)
		}
		// a conservative target of MaxFloat32 + MaxFloat64 (SumUp gives
		// +Inf) clamps at Hi, never Inf/NaN
		c.UpdateString("k", math.MaxFloat32)
		c.UpdateString("k", math.MaxFloat64)
		if got := c.QueryString("k"); got != math.MaxFloat32 {
			t.Errorf("conservative MaxFloat32 + MaxFloat64: %v, want MaxFloat32", got)
		}
		// huge deltas saturate, never Inf/NaN
		d, _ := core.New(core.Config{Levels: 2, CellsPerLevel: 64, Lo: -math.MaxFloat32, Hi: math.MaxFloat32, Clock: clk})
		d.UpdateString("k", math.MaxFloat32)
		d.UpdateString("k", math.MaxFloat64)
		if got := d.QueryString("k"); got != math.MaxFloat32 {
			t.Errorf("MaxFloat32 + MaxFloat64: %v, want MaxFloat32", got)
		}
		d.UpdateString("k", -math.MaxFloat64)
		if got := d.QueryString("k"); got != -math.MaxFloat32 {
			t.Errorf("then - MaxFloat64: %v, want -MaxFloat32", got)
		}
	}
}

// TestAudit82RollbackSubtractDeterministic: an admitted TryUpdate whose
// commit conflicts on level 1 after a colliding key's Update wrote both
// levels in the same ms (M = 1: every key shares the cells): the undo of
// level 0 subtracts (rule 3), then the call commits again. The final
// cells are never below the exact sum of every increment, and exactly
// the integer sum for integer deltas; a tiny colliding delta (absorbed
// by a float64 add) is kept.
func TestAudit82RollbackSubtractDeterministic(t *testing.T) {
	type tc struct{ base, a, b float64 }
	for _, c := range []tc{{0, 1, 2}, {5, 1, 1}, {0.1, 0.1, 0.3}, {0x1p60, 1, 1}, {0x1p40, 1e-9, 3}, {1e6, 0.1, 1e-5}} {
		for _, conserved := range []bool{false, true} {
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 1, Hi: math.MaxFloat32, Seed: 1, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if conserved {
				s.SetConserved()
			}
			s.UpdateString("base", c.base)
			fired, rollbacks := false, 0
			core.SetHooks(s, core.Hooks{
				BeforeCAS: func(level uint32) {
					if level == 1 && !fired {
						fired = true
						s.UpdateString("other", c.b)
					}
				},
				Rollback: func(uint32) { rollbacks++ },
			})
			if !s.TryUpdateString("k", c.a, math.MaxFloat64) {
				t.Fatal("denied")
			}
			core.SetHooks(s, core.Hooks{})
			if rollbacks == 0 {
				t.Fatalf("%+v: no roll-back happened (the hook did not cause a conflict)", c)
			}
			exact := new(big.Float).SetPrec(3000).SetFloat64(c.base)
			exact.Add(exact, new(big.Float).SetFloat64(c.a))
			exact.Add(exact, new(big.Float).SetFloat64(c.b))
			got := s.QueryString("k")
			if new(big.Float).SetFloat64(got).Cmp(exact) < 0 {
				t.Errorf("%+v conserved=%v: after the roll-back and re-commit, estimate %v below the exact sum %v", c, conserved, got, exact.Text('g', 25))
			}
			if c.base == math.Trunc(c.base) && c.a == 1 && c.b == math.Trunc(c.b) && c.base < 1<<24 {
				if f, _ := exact.Float64(); got != f {
					t.Errorf("%+v conserved=%v: integer roll-back not exact: %v, want %v", c, conserved, got, f)
				}
			}
			// the tight value: each add one ceil32 step; the undo may add
			// at most one more rounding per level
			t.Logf("%+v conserved=%v: %v (exact %v), %d roll-backs", c, conserved, got, exact.Text('g', 20), rollbacks)
		}
	}
}
