package limit_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66VictimOneSided: a victim key among many noisy keys in a
// crowded engine (count-min of 2 x 32 cells; Buckets sized for 20 keys),
// on exact rates that are not exact in float64. Package doc, "Error
// side": "a collision can only deny a key early, never admit it past its
// own limit", and "The durations of a Decision ... are exact for a key
// alone in its cells and only late, never early, under collisions". The
// victim's own rational bucket is fed the victim's admissions: every
// admission must fit it, every Remaining be at most its own, every
// RetryAfter, ResetAfter at least its own.
func TestAudit66VictimOneSided(t *testing.T) {
	cfgs := []struct {
		name string
		pol  a66Pol
		opts []limit.Option
	}{
		{"cm-third", a66Pol{1, 3, 4}, []limit.Option{limit.WithSize(2, 32), limit.WithMaxDebt(8)}},
		{"cm-7/13ms", a66Pol{7000, 13, 30}, []limit.Option{limit.WithSize(2, 32)}},
		{"cm-cu-0.3", a66Pol{3, 10, 5}, []limit.Option{limit.WithSize(2, 32), limit.WithConservativeUpdate(true)}},
		{"buckets-0.3", a66Pol{3, 10, 3}, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(20, 0.5), limit.WithMaxDebt(6)}},
		{"buckets-7/13ms", a66Pol{7000, 13, 30}, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(20, 0.5)}},
	}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(0); seed < 4; seed++ {
				rng := rand.New(rand.NewPCG(seed, 9))
				clk := sketchtest.NewFakeClock()
				now := int64(3_000_000)
				clk.Set(now)
				l, err := limit.New(c.pol.limit(), c.pol.b, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				o := &a66Oracle{d: new(big.Rat), at: now, max: new(big.Rat).Mul(c.pol.cost(), big.NewRat(1<<24, 1))}
				step := a66Ceil(c.pol.cost())
				for s := 0; s < 400; s++ {
					now += int64(rng.IntN(int(step) + 1))
					clk.Set(now)
					o.advance(now)
					tm := l.Now()
					// noise: many keys spending
					for j := 0; j < 20; j++ {
						k := fmt.Sprintf("noise-%d", rng.IntN(400))
						l.AllowN(tm, k, 1+rng.IntN(c.pol.b))
					}
					n := 1 + rng.IntN(c.pol.b)
					got := l.DecideN(tm, "victim", n)
					own := o.clone().decide(c.pol, n, 0, false)
					if got.Allowed {
						if !own.Allowed {
							t.Fatalf("seed %d step %d: victim admitted n=%d past its own bucket (debt %s ms)", seed, s, n, o.d.FloatString(3))
						}
						o.decide(c.pol, n, 0, true)
						own = o.clone().decide(c.pol, 1, 0, false) // fields after
						var f limit.Decision
						c.pol.fill(o.d, &f)
						if got.Remaining > f.Remaining || got.ResetAfter < f.ResetAfter {
							t.Fatalf("seed %d step %d: admitted victim reads Remaining %d ResetAfter %v, own bucket %d %v: early", seed, s, got.Remaining, got.ResetAfter, f.Remaining, f.ResetAfter)
						}
						continue
					}
					var f limit.Decision
					c.pol.fill(o.d, &f)
					if got.Remaining > f.Remaining || got.ResetAfter < f.ResetAfter || (!own.Allowed && got.RetryAfter < own.RetryAfter) {
						t.Fatalf("seed %d step %d: denied victim reads Remaining %d ResetAfter %v RetryAfter %v; own bucket %d %v %v: early",
							seed, s, got.Remaining, got.ResetAfter, got.RetryAfter, f.Remaining, f.ResetAfter, own.RetryAfter)
					}
				}
			}
		})
	}
}
