package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit103LimitFixedTinyDebtNextAfterZeroBelowBurst (fixed at stop 60, the text below
// says what was wrong; audit 103, review of
// 3094000): NextAfter 0 with Remaining below Burst, on a key whose
// Remaining grows by one 1 ms later. The fix's guard, (Remaining+1) x k
// <= burst, covers only a tiny debt that left Remaining at Burst; a
// tiny debt that float64 subtraction does see, but float64 addition
// does not, still answers 0.
//
// Doc says (limit/decision.go, Decision.NextAfter): "the time until
// Remaining grows by one (the next whole token); 0 when the bucket is
// full (Remaining == Burst)"; multi.go, DecideKeys: "NextAfter 0 when
// one of them is full: the least then never grows".
//
// Code does: remainingK counts with floor((burstU - debt)/unit), but
// fillK asks msUntilFits(debt, cost(Remaining+1)), whose test is the
// rounded add max(debt - drop(x), 0) + nU <= burstU. With burstU a power
// of two (New(r, 8) whose unit rounds up to 1024 units: burstU = 2^13)
// and a debt d0 = 3 x 2^-42 units (one token of a Tier 2^52/3 times
// faster), burstU - d0 rounds to 2^13 - 2^-40 (the float64 step below a
// power of two is half the step above it), so Remaining = 7, while d0 +
// 2^13 rounds to 2^13, so msUntilFits answers 0 ms. One ms later d0 has
// drained and Remaining is 8: NextAfter should be 1 ms. In a Multi(l, l)
// the same: Remaining 3 (requests of 2 tokens), NextAfter 0, Remaining
// 4 a ms later.
//
// Repro: r := 1000.0/1024*(1+2^-30); l := New(r, 8,
// WithEngine(CountMin)); l.Tier("f", r*2^52/3, 1).AllowN(now, "k", 1);
// l.PeekN(now, "k", 9) = {Remaining 7, NextAfter 0, ResetAfter 1ms};
// l.PeekN(now+1ms, "k", 9).Remaining = 8.
//
// Suggested fix: take NextAfter from the predicate Remaining is counted
// with: the least x for which remainingK(max(debt - drop(x), 0), k) >
// Remaining (an exact test, burstU - cost((Remaining+1) x k) >= the
// drained debt, msUntilBelow), so that it is 0 only where Remaining can
// never grow.
func TestAudit103LimitFixedTinyDebtNextAfterZeroBelowBurst(t *testing.T) {
	a103Child(t, a103TinyNextAfter)
}

func a103TinyNextAfter(t *testing.T) {
	r := 1000.0 / 1024 * (1 + math.Ldexp(1, -30))
	for _, k := range []int{1, 2} {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 30)
		l := limit.MustNew(limit.Limit(r), 8, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithCapacity(16, 0.01))
		f, err := l.Tier("f", limit.Limit(r*math.Ldexp(1, 52)/3), 1)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if !f.AllowN(now, "k", 1) {
			t.Fatal("setup: the tier denied a fresh key")
		}
		ws := make([]*limit.Limiter, k)
		for i := range ws {
			ws[i] = l
		}
		m, _ := limit.NewMulti(ws...)
		d := m.DecideKeys(now, 9, "k") // Never: a read, nothing taken
		clk.Advance(time.Millisecond)
		later := m.DecideKeys(clk.Now(), 9, "k")
		if !d.Never || !later.Never {
			t.Fatalf("setup: n = 9 is not Never: %+v %+v", d, later)
		}
		if d.NextAfter == 0 && later.Remaining > d.Remaining {
			t.Errorf("%d window(s) of New(%v, 8) with a debt of 3 x 2^-42 units: Remaining %d (Burst %d), NextAfter 0 (\"the bucket is full\"), yet Remaining is %d 1 ms later (NextAfter should be 1ms)",
				k, r, d.Remaining, d.Burst, later.Remaining)
		}
	}
}
