package limit_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13MultiNextAfterTie: a Multi's Remaining is the least of its
// windows', and NextAfter the time that least Remaining grows by one.
// With two windows tied at the least Remaining, it grows only when both
// have a token back: the later of their NextAfters. The oracle is the
// exact rational bucket per window: the least whole ms x at which
// min_i floor(burst_i - max(debt_i - r_i x / 1000, 0)) exceeds its value
// now. Mutation audit13 N17 (min of the tied NextAfters) says the
// faster window's time.
func TestAudit13MultiNextAfterTie(t *testing.T) {
	type win struct {
		num, den int64 // rate num/den per second
		burst    int
		taken    int
	}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, ws := range [][]win{
			{{10, 1, 2, 0}, {1, 1, 2, 0}},
			{{1, 1, 3, 0}, {10, 1, 3, 0}},
			{{5, 1, 4, 0}, {2, 1, 4, 0}, {1, 3, 10, 0}},
		} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 31)
			var ls []*limit.Limiter
			for _, w := range ws {
				l, err := limit.New(limit.Limit(w.num)/limit.Limit(w.den), w.burst, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(eng))
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			m, err := limit.NewMulti(ls...)
			if err != nil {
				t.Fatal(err)
			}
			// One request of 1 token: every window has burst-1 left; in
			// the third case the third window has more.
			d := m.DecideKeys(clk.Now(), 1, "k")
			if !d.Allowed {
				t.Fatalf("%v: first request denied", eng)
			}
			// The oracle.
			rem := func(i int, x int64) int64 {
				w := ws[i]
				debt := big.NewRat(1, 1) // one token taken at time 0
				debt.Sub(debt, big.NewRat(w.num*x, w.den*1000))
				if debt.Sign() < 0 {
					debt.SetInt64(0)
				}
				r := new(big.Rat).Sub(big.NewRat(int64(w.burst), 1), debt)
				return new(big.Int).Quo(r.Num(), r.Denom()).Int64()
			}
			least := func(x int64) int64 {
				v := rem(0, x)
				for i := range ws {
					v = min(v, rem(i, x))
				}
				return v
			}
			want := int64(0)
			for least(want) <= least(0) {
				want++
			}
			if int64(d.Remaining) != least(0) {
				t.Fatalf("%v %v: Remaining %d, oracle %d", eng, ws, d.Remaining, least(0))
			}
			if d.NextAfter != time.Duration(want)*time.Millisecond {
				t.Errorf("%v %v: NextAfter %v, oracle %v ms (the least Remaining grows then)", eng, ws, d.NextAfter, want)
			}
		}
	}
}
