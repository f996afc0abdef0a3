package limit_test

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a89rsRejectWant is what the rational bucket (a66Oracle, in ms of debt)
// answers to DecideN(n) under pol with a RejectCost of rc tokens (a
// rational, so that a non-integer RejectCost is priced exactly), and
// applies it: an admission adds n tokens; a denial adds rc (capped at
// MaxDebt) and reports the fields of the debt it left.
func a89rsRejectWant(o *a66Oracle, pol a66Pol, n int, rc *big.Rat) limit.Decision {
	if want := o.decide(pol, n, 0, false); want.Allowed || want.Never && rc.Sign() == 0 {
		return o.decide(pol, n, 0, true)
	}
	o.d.Add(o.d, new(big.Rat).Mul(pol.cost(), rc))
	if o.d.Cmp(o.max) > 0 {
		o.d.Set(o.max)
	}
	return o.decide(pol, n, 0, false)
}

// TestAudit89DecisionFixedRejectCostOffGrid (fixed: Exact now reports
// false for a RejectCost off the engine's grid, and such a limiter is
// only never early): the package doc
// ("Exactness", limit/doc.go:82-86) and Limiter.Exact (limit/units.go:8-12)
// promise that, when Exact reports true, "every decision, and every
// RetryAfter, ResetAfter, NextAfter and Remaining, is that of the
// rational bucket", whose denial debits RejectCost ("if !admitted &&
// rejectCost > 0 { engine.Update(key, rejectCost) }", doc.go:20), and
// WithRejectCost "debits c tokens of debt on every denial" (limit.go).
// A RejectCost that is not a whole number of the engine's units (ticks on
// Buckets, the float32 grid on the count-min) is stored rounded up, once
// per denial, while Exact still reports true. New(10, 20,
// WithRejectCost(1e-4)) on Buckets (ticks of 1/15 ms) charges a whole
// tick, 1/1500 of a token, per denial: after the burst and 16 denials in
// one millisecond RetryAfter is 102 ms where the bucket's (debt 20.0016)
// is 101 ms; on the count-min the float32 rounding makes the 100th
// denial 102 ms (want 101 ms), and WithRejectCost(0.333) the 10th 434 ms
// (want 433 ms). Late, never early, but not the rational bucket's that
// Exact promises. (New(1000, 1000, WithRejectCost(0.5)) is on the grid
// and agrees: a control.)
func TestAudit89DecisionFixedRejectCostOffGrid(t *testing.T) {
	cases := []struct {
		pol     a66Pol
		rc      *big.Rat
		rcF     float64
		eng     limit.Engine
		denials int
		exact   bool
	}{
		{a66Pol{1000, 1, 1000}, big.NewRat(1, 2), 0.5, limit.Auto, 4, true},
		{a66Pol{10, 1, 20}, big.NewRat(1, 2), 0.5, limit.CountMin, 30, true},
		{a66Pol{10, 1, 20}, big.NewRat(1, 10000), 1e-4, limit.Auto, 300, false},
		{a66Pol{10, 1, 20}, big.NewRat(1, 10000), 1e-4, limit.CountMin, 300, false},
		{a66Pol{10, 1, 20}, big.NewRat(333, 1000), 0.333, limit.CountMin, 30, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d/%d-b%d-rc%v-%v", c.pol.num, c.pol.den, c.pol.b, c.rcF, c.eng), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			const t0 = 5_000_000
			clk.Set(t0)
			l, err := limit.New(c.pol.limit(), c.pol.b, limit.WithClock(clk), limit.WithSeed(7),
				limit.WithRejectCost(c.rcF), limit.WithEngine(c.eng))
			if err != nil {
				t.Fatal(err)
			}
			if l.Exact() != c.exact {
				t.Fatalf("%v on %v, WithRejectCost(%v): Exact() = %v, want %v", c.pol.limit(), l.Engine(), c.rcF, l.Exact(), c.exact)
			}
			maxMs := new(big.Rat).Mul(c.pol.cost(), new(big.Rat).SetFloat64(l.MaxDebt()))
			o := &a66Oracle{d: new(big.Rat), at: t0, max: maxMs}
			at := l.Now()
			if !l.AllowN(at, "k", c.pol.b) {
				t.Fatal("the burst was not admitted from an empty key")
			}
			o.decide(c.pol, c.pol.b, 0, true)
			for i := 1; i <= c.denials; i++ {
				got := l.DecideN(at, "k", 1)
				want := a89rsRejectWant(o, c.pol, 1, c.rc)
				got.Policy = ""
				if !c.exact {
					if got.Allowed || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter || got.Remaining > want.Remaining {
						t.Fatalf("%v on %v, WithRejectCost(%v) (inexact): denial %d earlier than the rational bucket:\n got %+v\nwant %+v",
							c.pol.limit(), l.Engine(), c.rcF, i, got, want)
					}
					continue
				}
				if got != want {
					t.Fatalf("%v on %v, WithRejectCost(%v): denial %d at one ms:\n got %+v\nwant %+v (the rational bucket's)",
						c.pol.limit(), l.Engine(), c.rcF, i, got, want)
				}
			}
		})
	}
}
