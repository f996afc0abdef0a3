package limit_test

import (
	"errors"
	"fmt"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit91EngineDocExamples: the examples the change documents.
// docs/capacity.md's table: New(1000, 5, WithRejectCost(0.5)) and New(10,
// 20, WithMaxDebt(40.0001)) run on the count-min (and
// WithEngine(Buckets) refuses them with a *ConfigError naming Engine,
// engine.go's Buckets); New(1000, 5, WithRejectCost(0.5)) is exact there
// (docs/migrating.md, stop 57: "where the count-min is exact").
// WithRejectCost's example: New(10, 20, WithRejectCost(1e-4),
// WithEngine(CountMin)) is not Exact (0.01 units), and Auto runs it on
// the count-min too; "A whole number of tokens is always on the grid":
// whole RejectCosts keep Exact on both engines wherever the limiter
// without one is exact. Tier.Exact: "Tiers R/k for a whole k are exact on
// an exact limiter", with an on-grid fractional RejectCost too.
func TestAudit91EngineDocExamples(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
		opts  []limit.Option
		exact bool
	}{
		{1000, 5, []limit.Option{limit.WithRejectCost(0.5)}, true},
		{10, 20, []limit.Option{limit.WithMaxDebt(40.0001)}, false}, // 4000.01 units: off the count-min's grid too (audit 91)
		{10, 20, []limit.Option{limit.WithRejectCost(1e-4)}, false},
	} {
		l := limit.MustNew(c.lim, c.burst, c.opts...)
		if l.Engine() != limit.CountMin || l.Exact() != c.exact {
			t.Errorf("New(%v, %d, ...): %v, Exact %v; the docs: count-min, Exact %v", c.lim, c.burst, l.Engine(), l.Exact(), c.exact)
		}
		_, err := limit.New(c.lim, c.burst, append(c.opts, limit.WithEngine(limit.Buckets))...)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Engine" || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("New(%v, %d, ..., WithEngine(Buckets)): %v, want a *ConfigError naming Engine", c.lim, c.burst, err)
		}
	}
	for _, p := range []a66Pol{{10, 1, 20}, {1000, 1, 5}, {1, 1, 30}, {1, 3, 4}, {2000, 3, 50}, {1000, 7, 8}, {4, 1, 10}, {3, 10, 5}} {
		for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
			base, err := limit.New(p.limit(), p.b, limit.WithEngine(eng), limit.WithMaxDebt(3*float64(p.b)), limit.WithCapacity(4, 0.1))
			if err != nil || !base.Exact() {
				continue
			}
			for _, rc := range []float64{1, 2, float64(p.b)} {
				l, err := limit.New(p.limit(), p.b, limit.WithEngine(eng), limit.WithMaxDebt(3*float64(p.b)), limit.WithRejectCost(rc), limit.WithCapacity(4, 0.1))
				if err != nil || !l.Exact() {
					t.Errorf("%v/%ds b%d on %v, RejectCost %v: Exact %v, err %v; a whole number of tokens is always on the grid", p.num, p.den, p.b, eng, rc, err == nil && l.Exact(), err)
				}
			}
		}
	}
	// Tiers R/k on an Auto limiter on Buckets with a fractional on-grid RejectCost.
	clk := limittest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithRejectCost(0.25))
	if l.Engine() != limit.Buckets || !l.Exact() {
		t.Fatalf("New(10, 20, WithRejectCost(0.25)): %v, Exact %v", l.Engine(), l.Exact())
	}
	for k := 2; k <= 6; k++ {
		r := new(big.Rat).SetFrac64(10, int64(k))
		rf, _ := r.Float64()
		tr, err := l.Tier(fmt.Sprint("t", k), limit.Limit(rf), 40/k)
		if err != nil || !tr.Exact() {
			t.Errorf("Tier(10/%d, %d) of an exact limiter: err %v, Exact %v", k, 40/k, err, err == nil && tr.Exact())
		}
	}
}

// TestAudit91EngineFindingDocTokenOneTick (a finding, docs):
// docs/capacity.md's engine table gives New(1000, 5,
// WithRejectCost(0.5)) as a count-min limiter because "a RejectCost ...
// is not a whole number of ticks (a token is one tick at 1000/s ...)".
// At 1000/s the Buckets engine counts thousands of ticks a token (the
// most whose MaxDebt and millisecond fit 65,534: 5,957 at MaxDebt 10,
// an odd number, which is why 0.5 is off the grid there): with
// WithMaxDebt(10.5) it is 5,698, and New(1000, 5, WithRejectCost(0.5),
// WithMaxDebt(10.5)) runs on Buckets, Exact, as does WithEngine(Buckets)
// with a RejectCost of one 5957th of a token at MaxDebt 10, neither of
// which one tick a token allows. docs/migrating.md's stop-57 row says the
// same limiter was charged "a whole token a denial" on Buckets before
// (it was 2,979 ticks, half a token and one tick).
func TestAudit91EngineFixedDocTokenOneTick(t *testing.T) {
	// docs/capacity.md now: at 1000/s with MaxDebt 10 a token is 5,957
	// ticks; with MaxDebt 10.5, 5,698, and that limiter runs on Buckets.
	if l := limit.MustNew(1000, 5, limit.WithRejectCost(0.5), limit.WithMaxDebt(10.5)); l.Engine() != limit.Buckets || !l.Exact() {
		t.Errorf("New(1000, 5, WithRejectCost(0.5), WithMaxDebt(10.5)): %v, Exact %v; docs/capacity.md: Buckets", l.Engine(), l.Exact())
	}
	if l := limit.MustNew(1000, 5, limit.WithRejectCost(0.5)); l.Engine() != limit.CountMin {
		t.Errorf("New(1000, 5, WithRejectCost(0.5)): %v; docs/capacity.md: count-min", l.Engine())
	}
}
