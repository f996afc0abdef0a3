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

// TestAudit91EngineFixedCountMinOffGridMaxDebtReserve (fixed: Exact now
// reports false where MaxDebt in units is off the count-min's grid, and
// such a limiter is asserted never early) (a finding):
// audit 90 made the Buckets engine hold only a MaxDebt of whole ticks,
// but the count-min still reports Exact for a MaxDebt that is no whole
// number of its units, and holds a key at that clamp at the float32
// above it (an inexact float32 in a cell; held): after 1 ms of drain a
// ReserveN that brings the key back to exactly MaxDebt is refused,
// where the rational bucket of the decimal MaxDebt takes it.
// New(1000, 1, WithMaxDebt(20.03), WithRejectCost(1)) (Auto: the
// count-min; a unit is a token, 20.03 units) after the burst and 25
// denials holds 20.03 tokens; 1 ms later ReserveN(1) (19.03 + 1 = 20.03
// <= MaxDebt) is refused, OK false; the bucket says OK with Delay 20 ms.
// Same with New(1000, 5, WithMaxDebt(10.1)) (Delay 6 ms) and at 10/s
// with WithMaxDebt(40.0001) (4000.01 units, 100 ms later). limit/doc.go
// "Exactness": "every decision ... is that of the rational bucket ...
// when Exact reports true"; WithMaxDebt (limit.go): "a decimal d means
// what it says" (limit.go:163); the count-min's held-at-the-float32-above
// exception (doc.go:126-131, Decision.RetryAfter) is stated for "a key
// read at MaxDebt" at a rate that is not a short fraction, "above about
// 65,536 tokens", and for durations, not for a refused reservation. The
// rational bucket of 40.0001 tokens is what audit 90 moved this
// limiter to the count-min for (docs/migrating.md:305). Exact should
// report false there (as for an off-grid RejectCost), or the clamp be
// held exactly.
func TestAudit91EngineFixedCountMinOffGridMaxDebtReserve(t *testing.T) {
	for _, c := range []struct {
		pol a66Pol
		md  string
	}{{a66Pol{1000, 1, 1}, "20.03"}, {a66Pol{10, 1, 20}, "40.0001"}, {a66Pol{1000, 1, 5}, "10.1"}} {
		for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
			t.Run(fmt.Sprint(c.pol.limit(), "-", c.md, "-", eng), func(t *testing.T) {
				mdR := a91Rat(c.md)
				md, _ := mdR.Float64()
				clk := limittest.NewFakeClock()
				clk.Set(1_000_000)
				l := limit.MustNew(c.pol.limit(), c.pol.b, limit.WithClock(clk), limit.WithSeed(1), limit.WithEngine(eng),
					limit.WithMaxDebt(md), limit.WithRejectCost(1), limit.WithCapacity(8, 0.05))
				if l.Exact() {
					t.Fatalf("%v, MaxDebt %s on %v: Exact true, with MaxDebt off the count-min's grid", c.pol.limit(), c.md, l.Engine())
				}
				o := &a66Oracle{d: new(big.Rat), at: 1_000_000, max: new(big.Rat).Mul(c.pol.cost(), mdR)}
				one := big.NewRat(1, 1)
				now := l.Now()
				l.AllowN(now, "k", c.pol.b)
				a90Decide(o, c.pol, c.pol.b, one, true, -1)
				for range int(md) + 5 {
					l.DecideN(now, "k", 1)
					a90Decide(o, c.pol, 1, one, true, -1)
				}
				clk.Advance(a66ms(a66Ceil(c.pol.cost()))) // one token's drain
				o.advance(clk.NowMillis())
				r := l.ReserveN(l.Now(), "k", 1)
				wok, wd := o.reserve(c.pol, 1)
				if r.OK() && (!wok || r.DelayFrom(l.Now()) < wd) {
					t.Errorf("%v on %v (Exact false): at MaxDebt less a token's drain, ReserveN(1): OK %v Delay %v, earlier than the rational bucket of MaxDebt %s: OK %v Delay %v",
						c.pol.limit(), l.Engine(), r.OK(), r.DelayFrom(l.Now()), c.md, wok, wd)
				}
			})
		}
	}
}

// TestAudit91EngineFixedCountMinMaxDebtProductDurations (fixed: MaxDebt
// in units is held as the whole number within 4 ulps of the product,
// 400001, so the limiter is exact and equals the bucket) (a finding,
// the same cause): WithMaxDebt's "held in the limiter's units as the
// float64 nearest to d x unit, so a decimal d means what it says"
// (limit/limit.go) is the float64 product of the float64 d and the unit,
// which need not be the decimal's: New(0.3, 2, WithMaxDebt(40.0001),
// WithRejectCost(0.5)) counts 10000 units a token, and 40.0001 x 10000
// is 400001.0000000000582 in float64, not 400001; the count-min, Exact
// true, holds a key at that clamp at the float32 above, 400001.03125
// units. After the clamp, 4 s and two denials (0.5 token each) the
// rational bucket of 40.0001 tokens holds 132667 ms of debt; the
// limiter's ResetAfter reads 132668 ms, 1 ms late, with the key no
// longer at MaxDebt (the held-clamp exception, doc.go:126-131, is for a
// key read at MaxDebt). doc.go:84-87: "every decision, and every
// RetryAfter, ResetAfter ... is that of the rational bucket ..., when
// Exact reports true".
func TestAudit91EngineFixedCountMinMaxDebtProductDurations(t *testing.T) {
	pol := a66Pol{3, 10, 2}
	mdR := a91Rat("40.0001")
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(pol.limit(), pol.b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(40.0001),
		limit.WithRejectCost(0.5), limit.WithCapacity(8, 0.05))
	if !l.Exact() {
		t.Fatalf("0.3/s, MaxDebt 40.0001 (400001 units) on %v: Exact false", l.Engine())
	}
	o := &a66Oracle{d: new(big.Rat), at: 1_000_000, max: new(big.Rat).Mul(pol.cost(), mdR)}
	half := big.NewRat(1, 2)
	now := l.Now()
	l.AllowN(now, "k", 2)
	a90Decide(o, pol, 2, half, true, -1)
	for range 90 {
		l.DecideN(now, "k", 1)
		a90Decide(o, pol, 1, half, true, -1)
	}
	clk.Advance(a66ms(4000))
	o.advance(clk.NowMillis())
	for range 2 {
		l.DecideN(l.Now(), "k", 1)
		a90Decide(o, pol, 1, half, true, -1)
	}
	got := l.PeekN(l.Now(), "k", 1)
	want, _ := a90Decide(o, pol, 1, half, false, -1)
	got.Policy = ""
	if got != want {
		t.Errorf("0.3/s, MaxDebt 40.0001 on %v (Exact true), debt %s ms in the rational bucket:\n got %+v\nwant %+v",
			l.Engine(), o.d.FloatString(3), got, want)
	}
}

// TestAudit91EngineNeedBucketsRejectCostDocumented (a finding, now
// documented on MaxDebtError): on a limiter
// built WithEngine(Buckets) with a RejectCost, MaxDebtError.Need can be
// a MaxDebt that New refuses for that RejectCost (off the ticks the
// larger MaxDebt gives), a reason the doc does not list: New(4, 10,
// WithRejectCost(0.25), WithEngine(Buckets)) (MaxDebt 20) refuses
// Tier(1.6, 10) with Need 25, and New(4, 10, WithRejectCost(0.25),
// WithEngine(Buckets), WithMaxDebt(25)) is a *ConfigError naming Engine
// ("... a token, MaxDebt and RejectCost being whole numbers of them"),
// though 25 tokens (6.25 s) are well within the span and the same
// without the RejectCost is taken. MaxDebtError (limit/tier.go): "a
// limiter built as this one but WithMaxDebt(Need) takes it ..., unless
// New refuses that MaxDebt (above 2^24, or beyond the Buckets engine's
// span)". needFor prices the Buckets engine without the RejectCost
// (New(..., WithMaxDebt(need), WithEngine(Buckets)) in tier.go) once
// bucketsMaxDebt finds no grid for it. The least MaxDebt (in steps of
// 1/16) that WithEngine(Buckets) takes with RejectCost 0.25 and that
// holds the tier is 27.3125 (2,000 ticks a token; at 25 it is 2,250, and
// 0.25 token 562.5 ticks). Same for New(1000/7 (Every(7ms)), 8,
// WithRejectCost(0.5), WithEngine(Buckets)), Tier(1000/21, 8): Need 24,
// least 24.375; New(4, 10, WithRejectCost(1/3), WithEngine(Buckets)),
// Tier(4/3, 10): Need 30, least 35.25. Either Need should be a MaxDebt
// the engine takes with the RejectCost, or the doc should list the
// RejectCost among New's reasons (under Auto, Need is taken: the
// count-min holds it).
func TestAudit91EngineNeedBucketsRejectCostDocumented(t *testing.T) {
	// MaxDebtError's doc now lists this refusal: with WithEngine(Buckets)
	// and a RejectCost that is not a whole number of tokens, New may
	// refuse Need (its ticks do not hold that RejectCost whole), and Auto
	// takes it on the count-min.
	for _, c := range []a91NeedCase{
		{pol: a66Pol{4, 1, 10}, rc: 0.25, eng: limit.Buckets, tier: a66Pol{8, 5, 10}},
		{pol: a66Pol{1000, 7, 8}, rc: 0.5, eng: limit.Buckets, tier: a66Pol{1000, 21, 8}},
		{pol: a66Pol{4, 1, 10}, rc: 1.0 / 3, eng: limit.Buckets, tier: a66Pol{4, 3, 10}},
	} {
		t.Run(c.String(), func(t *testing.T) {
			l, err := c.build(0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Tier("t", c.tier.limit(), c.tier.b)
			var me *limit.MaxDebtError
			if !errors.As(err, &me) {
				t.Fatalf("Tier: %v, want a *MaxDebtError", err)
			}
			if ok, nerr := c.holds(me.Need); !ok {
				var ce *sketch.ConfigError
				if !errors.As(nerr, &ce) || ce.Field != "Engine" {
					t.Errorf("Need %v: WithEngine(Buckets) neither takes the tier nor refuses the engine: %v", me.Need, nerr)
				}
			}
			auto := c
			auto.eng = limit.Auto
			if ok, err := auto.holds(me.Need); !ok {
				t.Errorf("Need %v under Auto: the tier is not taken (%v)", me.Need, err)
			}
		})
	}
}

// TestAudit91EngineTierExactRejectCostDocumented (a finding, docs; the
// doc now names the RejectCost):
// Tier.Exact's doc (limit/tier.go) gives two conditions, "the limiter
// is, and a token of the tier costs exactly R/r tokens of the limiter's
// rate R in the engine's units", and WithRejectCost (limit.go) says "The
// Buckets engine holds only a c that is then a whole number of its
// ticks". New(10, 20, WithRejectCost(1/1500)) runs on Buckets, Exact (a
// RejectCost of one tick of 1,500 a token); its Tier(15, 20) costs 1,000
// ticks a token, exactly R/r = 2/3 of New's, yet Tier.Exact reports false:
// the tier's RejectCost, 2/3 of a tick, is off the grid and each of its
// denials is charged a whole tick. The code is on the safe side (late,
// and Exact says so); the docs omit the RejectCost from Tier.Exact's
// conditions (Limiter.Exact's doc has it) and say the Buckets engine
// never holds an off-grid one.
func TestAudit91EngineTierExactRejectCostDocumented(t *testing.T) {
	// Tier.Exact's doc now names the RejectCost priced in the tier's
	// tokens among its conditions: 2/3 of a tick is off the grid.
	l := limit.MustNew(10, 20, limit.WithRejectCost(1.0/1500))
	tr, err := l.Tier("t", 15, 20)
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.Buckets || !l.Exact() || tr.Exact() {
		t.Errorf("New(10, 20, WithRejectCost(1/1500)): %v, Exact %v; Tier(15, 20): Exact %v; want Buckets, true, false", l.Engine(), l.Exact(), tr.Exact())
	}
}
