package limit_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit90ExactSetLimitRejectGrid: Exact is recomputed for the policy
// SetLimit and SetBurst install, RejectCost included ("under its current
// policy ..., and RejectCost on the engine's grid", units.go), as
// Tier.Exact is for a tier of the same policy. New(10, 20) on Buckets has
// a token of 1500 ticks, so RejectCost 0.5 (750) is on its grid; at 1000/s
// a token is 15 ticks and 0.5 of it (7.5) is not, so SetLimit(1000) turns
// Exact off and SetLimit(10) back on; on the count-min both are on the
// grid. Where Exact is true, the burst and three denials in one ms read
// as the rational bucket; where false, never earlier.
func TestAudit90ExactSetLimitRejectGrid(t *testing.T) {
	type step struct {
		lim   a66Pol
		exact bool
	}
	cases := []struct {
		eng   limit.Engine
		steps []step
	}{
		{limit.Buckets, []step{{a66Pol{10, 1, 20}, true}, {a66Pol{1000, 1, 20}, false}, {a66Pol{5, 1, 20}, true},
			{a66Pol{1000, 1, 10}, false}, {a66Pol{10, 3, 4}, true}, {a66Pol{10, 1, 20}, true}}},
		{limit.CountMin, []step{{a66Pol{10, 1, 20}, true}, {a66Pol{1000, 1, 20}, true}, {a66Pol{5, 1, 20}, true},
			{a66Pol{10, 3, 4}, true}, {a66Pol{10, 1, 20}, true}}},
	}
	half := big.NewRat(1, 2)
	for _, c := range cases {
		t.Run(fmt.Sprint(c.eng), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_000_000)
			l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(c.eng), limit.WithRejectCost(0.5))
			maxMs := new(big.Rat).Mul(a66Pol{10, 1, 20}.cost(), new(big.Rat).SetFloat64(l.MaxDebt()))
			for i, s := range c.steps {
				if i > 0 {
					if err := l.SetBurst(1); err != nil {
						t.Fatal(err)
					}
					if err := l.SetLimit(s.lim.limit()); err != nil {
						t.Fatal(err)
					}
					if err := l.SetBurst(s.lim.b); err != nil {
						t.Fatal(err)
					}
				}
				tr, err := l.Tier("", s.lim.limit(), s.lim.b)
				if err != nil {
					t.Fatal(err)
				}
				if l.Exact() != s.exact || tr.Exact() != s.exact {
					t.Fatalf("policy %v: Limiter.Exact %v, Tier.Exact %v, want %v", s.lim, l.Exact(), tr.Exact(), s.exact)
				}
				key := fmt.Sprint("k", i)
				now := l.Now()
				o := &a66Oracle{d: new(big.Rat), at: clk.NowMillis(), max: maxMs}
				if !l.AllowN(now, key, s.lim.b) {
					t.Fatalf("policy %v: the burst was not admitted", s.lim)
				}
				a90Decide(o, s.lim, s.lim.b, half, true, -1)
				for j := range 3 {
					got := l.DecideN(now, key, 1)
					want, _ := a90Decide(o, s.lim, 1, half, true, -1)
					got.Policy = ""
					if s.exact && got != want || got.Allowed || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter {
						t.Fatalf("policy %v (Exact %v), denial %d:\n got %+v\nwant %+v", s.lim, s.exact, j+1, got, want)
					}
				}
			}
		})
	}
}

// TestAudit90ExactTierRejectCapped: a tier's RejectCost in its own
// tokens can exceed MaxDebt (tier.go caps the debit at MaxDebt's units);
// where the tier reports Exact, a denial's debit is still the rational
// bucket's, min(debt + RejectCost, MaxDebt), on both engines: New(10, 20,
// WithMaxDebt(40), WithRejectCost(30)) with Tier(10/3, 5) (30 tier tokens
// are 90 of New's, capped at 40) and Tier(10/7, 2) (RejectCost 30 of 700
// ms). A Never request and an ordinary denial from partly drained debts.
func TestAudit90ExactTierRejectCapped(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, tp := range []a66Pol{{10, 3, 5}, {10, 7, 2}, {20, 1, 30}} {
			t.Run(fmt.Sprint(eng, tp), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(1_000_000)
				l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(eng),
					limit.WithMaxDebt(40), limit.WithRejectCost(30))
				tr, err := l.Tier("t", tp.limit(), tp.b)
				if err != nil {
					t.Fatal(err)
				}
				if !l.Exact() || !tr.Exact() {
					t.Fatalf("Exact %v, Tier.Exact %v", l.Exact(), tr.Exact())
				}
				rc := big.NewRat(30, 1)
				o := &a66Oracle{d: new(big.Rat), at: clk.NowMillis(), max: big.NewRat(4000, 1)}
				for i, n := range []int{tp.b + 1, 1, tp.b, 1, tp.b + 1, 1} {
					if i%2 == 1 {
						clk.Advance(1234 * time.Millisecond)
						o.advance(clk.NowMillis())
					}
					got := tr.DecideN(l.Now(), "k", n)
					want, _ := a90Decide(o, tp, n, rc, true, -1)
					got.Policy = ""
					if got != want {
						t.Fatalf("op %d, DecideN(%d) under the tier (debt %s ms):\n got %+v\nwant %+v", i, n, o.d.FloatString(3), got, want)
					}
				}
			})
		}
	}
}
