package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit129DelayAgainstBucketSubMs: a limittest clock moved in random
// sub-ms steps (forward only), reservations of one key taken through the
// short form (Reserve, at the clock's reading); against the rational
// bucket decided at whole ms (GCRA in exact units: each token costs
// 1000/r ms, the i-th acts at ceil(tat - burst x cost) ms), every
// reservation's Delay() is DelayFrom(clock.Now()) at every later
// reading, is a whole number of ms, and is the model's act time less
// NowMillis (0 once past). Both engines, rates whose cost is not a
// whole ms.
func TestAudit129DelayAgainstBucketSubMs(t *testing.T) {
	for _, e := range a127Engines {
		for _, k := range []struct{ rate, burst int }{{3, 2}, {7, 1}, {300, 3}} {
			rng := rand.New(rand.NewPCG(uint64(k.rate), 129))
			c := a127Clock(time.Duration(rng.Int64N(1e6)))
			l := limit.MustNew(limit.Limit(k.rate), k.burst, limit.WithClock(c), limit.WithEngine(e), limit.WithSeed(129), limit.WithMaxDebt(float64(k.burst+6)))
			if !l.Exact() {
				t.Fatalf("%v %d/s: not Exact", e, k.rate)
			}
			// Units of 1/rate ms: a token costs 1000 units, a ms rate units.
			r := int64(k.rate)
			var tat int64 = -1 << 62
			type res struct {
				rv  *limit.Reservation
				act int64 // ms
			}
			var all []res
			for step := range 400 {
				now := c.NowMillis()
				if rng.IntN(3) == 0 {
					rv := l.Reserve("k")
					nt := max(tat, now*r) + 1000
					ok := nt-now*r <= int64(k.burst+6)*1000
					if rv.OK() != ok {
						t.Fatalf("%v %d/s step %d: OK %v, model %v", e, k.rate, step, rv.OK(), ok)
					}
					if ok {
						tat = nt
						a := tat - int64(k.burst)*1000 // units
						act := (a + r - 1) / r         // ceil, a > 0 here
						if a <= now*r {
							act = now
						}
						all = append(all, res{rv, act})
					}
				}
				for i, x := range all {
					d, from := x.rv.Delay(), x.rv.DelayFrom(c.Now())
					want := time.Duration(max(0, x.act-now)) * time.Millisecond
					if d != from || d != want || d%time.Millisecond != 0 {
						t.Fatalf("%v %d/s step %d: reservation %d (act %d ms, NowMillis %d): Delay %v, DelayFrom(clock.Now()) %v, model %v",
							e, k.rate, step, i, x.act, now, d, from, want)
					}
				}
				c.Advance(time.Duration(rng.Int64N(40e6))) // 0 .. 40 ms, mostly with a fraction
			}
		}
	}
}
