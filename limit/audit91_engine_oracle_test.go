package limit_test

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// a91Cfg is one configuration: New's policy, a MaxDebt and a RejectCost
// given as the user writes them (md 0: the default) and as the rationals
// they mean (a decimal means what it says: WithMaxDebt, WithRejectCost).
type a91Cfg struct {
	pol      a66Pol
	md, rc   float64
	mdR, rcR *big.Rat // mdR: the MaxDebt meant, the default's included
}

func (c a91Cfg) String() string {
	return fmt.Sprintf("%d/%ds-b%d-md%v-rc%v", c.pol.num, c.pol.den, c.pol.b, c.md, c.rc)
}

func (c a91Cfg) build(clk *limittest.FakeClock, eng limit.Engine, seed uint64) (*limit.Limiter, error) {
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(eng),
		limit.WithRejectCost(c.rc), limit.WithCapacity(8, 0.05)}
	if c.md != 0 {
		opts = append(opts, limit.WithMaxDebt(c.md))
	}
	return limit.New(c.pol.limit(), c.pol.b, opts...)
}

// a91Rat parses a decimal or a fraction ("1/3").
func a91Rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// a91Configs returns every combination of rates, bursts, MaxDebts and
// RejectCosts the brief names (decimal MaxDebts 20.03, 40.0001, b + 1/3;
// RejectCosts 0.1, 0.5, 0.25, 1e-4, 2.5, 1/3, whole ones) that New takes.
func a91Configs() []a91Cfg {
	rates := []a66Pol{{10, 1, 0}, {1000, 1, 0}, {1, 1, 0}, {1, 3, 0}, {3, 10, 0}, {2000, 3, 0}, {1000, 7, 0},
		{4, 1, 0}, {5000, 1, 0}, {100, 1, 0}, {250, 1, 0}, {20, 1, 0}, {1, 2, 0}, {50, 7, 0}, {1000, 3, 0}}
	bursts := []int{1, 3, 20}
	rcs := []string{"0", "1", "0.1", "0.5", "0.25", "0.0001", "2.5", "1/3"}
	var out []a91Cfg
	for _, p := range rates {
		for _, b := range bursts {
			p.b = b
			bR := big.NewRat(int64(b), 1)
			mds := []string{"0", fmt.Sprint(b), "20.03", "40.0001", fmt.Sprintf("%d/3", 3*b+1), fmt.Sprintf("%d.5", 2*b), fmt.Sprintf("%d.25", b), fmt.Sprint(3 * b)}
			for _, mds := range mds {
				for _, rcs := range rcs {
					c := a91Cfg{pol: p, mdR: a91Rat(mds), rcR: a91Rat(rcs)}
					c.md, _ = c.mdR.Float64()
					c.rc, _ = c.rcR.Float64()
					if c.md == 0 {
						// the default: max(2 x burst, burst + RejectCost)
						c.mdR = new(big.Rat).Mul(bR, big.NewRat(2, 1))
						if s := new(big.Rat).Add(bR, c.rcR); s.Cmp(c.mdR) > 0 {
							c.mdR = s
						}
					}
					if c.mdR.Cmp(bR) < 0 || c.rcR.Cmp(c.mdR) > 0 {
						continue
					}
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// TestAudit91EngineAutoBucketsExact: Auto "picks Buckets wherever it is
// exact and CountMin elsewhere (...; a MaxDebt or a RejectCost that is
// not a whole number of ticks)" (limit/doc.go, "Engines"); "The Buckets
// engine is always exact for New's policy" (doc.go, "Exactness"); New
// "refuses WithEngine(Buckets) otherwise" (engine.go, Buckets). Over
// every configuration of a91Configs, under Auto: a limiter on Buckets
// reports Exact, WithEngine(Buckets) is taken exactly where Auto picks
// Buckets (else a *ConfigError naming Engine), and every limiter that
// reports Exact matches the rational bucket of the decimal MaxDebt and
// RejectCost field for field, through bursts, denials charging the
// RejectCost up to the MaxDebt clamp, Never requests and reservations;
// one that does not is never earlier than that bucket (its decision,
// RetryAfter, ResetAfter and Remaining; NextAfter counts to another
// token there), the doc's
// "Otherwise decisions are never earlier than the exact bucket's").
func TestAudit91EngineAutoBucketsExact(t *testing.T) {
	testsize.Serial(t)
	cfgs := a91Configs()
	var onBuckets, exactCM, inexact, cmps, exactAtClamp int
	for i, cfg := range cfgs {
		if i%(2*testsize.Pick(1, 3)) != 0 {
			continue
		}
		clk := limittest.NewFakeClock()
		l, err := cfg.build(clk, limit.Auto, 1)
		if err != nil {
			t.Fatalf("%v: Auto: %v", cfg, err)
		}
		_, berr := cfg.build(clk, limit.Buckets, 1)
		switch eng := l.Engine(); {
		case eng == limit.Buckets && berr != nil:
			t.Errorf("%v: Auto picks Buckets, WithEngine(Buckets) refuses it: %v", cfg, berr)
		case eng == limit.CountMin && berr == nil:
			t.Errorf("%v: WithEngine(Buckets) takes it, Auto picks the count-min", cfg)
		case eng == limit.CountMin:
			var ce *sketch.ConfigError
			if !errors.As(berr, &ce) || ce.Field != "Engine" {
				t.Errorf("%v: WithEngine(Buckets) refused with %v, want a *ConfigError naming Engine", cfg, berr)
			}
		}
		switch {
		case l.Engine() == limit.Buckets:
			onBuckets++
			if !l.Exact() {
				t.Errorf("%v: on Buckets, Exact false", cfg)
				continue
			}
		case l.Exact():
			exactCM++
		default:
			inexact++
			// Only where the rate's cost itself is exact: an inexact cost
			// is late against its own (rounded) bucket, which is not the
			// rational one the oracle runs.
			c0 := cfg
			c0.rc, c0.md = 0, l.MaxDebt()
			if s, err := c0.build(limittest.NewFakeClock(), limit.CountMin, 1); err != nil || !s.Exact() {
				continue
			}
		}
		c, a := a91Run(t, cfg, l, clk, uint64(i))
		cmps += c
		if l.Exact() {
			exactAtClamp += a
		}
	}
	t.Logf("%d configurations: %d on Buckets, %d exact on the count-min, %d inexact; %d comparisons, %d of an Exact limiter at MaxDebt",
		len(cfgs), onBuckets, exactCM, inexact, cmps, exactAtClamp)
	if k := len(cfgs) / 2 / testsize.Pick(1, 3); onBuckets < k/10 || exactCM < k/10 || inexact < k/20 || cmps < 20*k || exactAtClamp < k {
		t.Fatalf("too little checked")
	}
}

// a91Run drives key "k" of l (built at clock 0) through a schedule that
// reaches the MaxDebt clamp through RejectCost debits and reservations,
// and compares it with the rational bucket: field for field when l is
// Exact, never earlier otherwise (the bucket then follows l's outcomes).
func a91Run(t *testing.T, cfg a91Cfg, l *limit.Limiter, clk *limittest.FakeClock, seed uint64) (cmps, atClamp int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 91))
	now := int64(4_000_000)
	clk.Set(now)
	pol := cfg.pol
	o := &a66Oracle{d: new(big.Rat), at: now, max: new(big.Rat).Mul(pol.cost(), cfg.mdR)}
	// A count-min whose MaxDebt in units is no float32 holds a key at its
	// clamp at the float32 above, Exact or not (the findings
	// TestAudit91EngineFindingCountMinOffGridMaxDebtReserve and
	// ...MaxDebtProductDurations): compared as never early only.
	held := l.Engine() == limit.CountMin && !a91Float32Units(pol, cfg.md)
	exact := l.Exact() && !held
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		if len(log) > 10 {
			log = log[len(log)-10:]
		}
		t.Fatalf("%v on %v (Exact %v, compared as exact %v, seed %d): "+format+"\nlast ops: %q", append([]any{cfg, l.Engine(), l.Exact(), exact, seed}, append(args, log)...)...)
	}
	burstMs := a66Ceil(pol.burstMs())
	for step := 0; step < 70; step++ {
		switch x := rng.IntN(10); {
		case x < 5:
		case x < 8:
			now += int64(rng.IntN(3))
		default:
			now += int64(rng.IntN(int(burstMs) + 2))
		}
		clk.Set(now)
		o.advance(now)
		tm := l.Now()
		op := rng.IntN(10)
		n := 1
		switch rng.IntN(4) {
		case 0:
			n = pol.b
		case 1:
			n = pol.b + 1 // Never: charges the RejectCost
		case 2:
			n = 1 + rng.IntN(pol.b)
		}
		log = append(log, fmt.Sprintf("t=%d op=%d n=%d debt=%s", now, op, n, o.d.FloatString(4)))
		if o.d.Cmp(o.max) == 0 {
			atClamp++
		}
		switch {
		case op < 6: // DecideN / PeekN
			commit := op != 5
			var got limit.Decision
			if commit {
				got = l.DecideN(tm, "k", n)
			} else {
				got = l.PeekN(tm, "k", n)
			}
			got.Policy = ""
			cmps++
			if exact {
				if want, _ := a90Decide(o, pol, n, cfg.rcR, commit, -1); got != want {
					fail("DecideN/PeekN(%d) commit %v:\n got %+v\nwant %+v", n, commit, got, want)
				}
				continue
			}
			force := 0
			if got.Allowed {
				force = 1
			}
			want, fits := a90Decide(o, pol, n, cfg.rcR, commit, force)
			if got.Allowed && !fits || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter ||
				got.Remaining > want.Remaining || got.Never != want.Never {
				fail("inexact DecideN/PeekN(%d) commit %v earlier than the bucket:\n got %+v\nwant %+v", n, commit, got, want)
			}
		case op < 8: // AllowN
			ok := l.AllowN(tm, "k", n)
			force := -1
			if !exact {
				force = 0
				if ok {
					force = 1
				}
			}
			want, fits := a90Decide(o, pol, n, cfg.rcR, true, force)
			cmps++
			if exact && ok != want.Allowed || ok && !fits {
				fail("AllowN(%d) = %v, the bucket %v", n, ok, fits)
			}
		default: // ReserveN, pushing the debt above the burst
			if n > pol.b {
				n = pol.b
			}
			r := l.ReserveN(tm, "k", n)
			before := o.clone()
			wok, wd := o.reserve(pol, n)
			cmps++
			if exact && (r.OK() != wok || r.OK() && r.DelayFrom(tm) != wd) {
				fail("ReserveN(%d): OK %v Delay %v, the bucket %v %v", n, r.OK(), r.DelayFrom(tm), wok, wd)
			}
			if !exact && r.OK() && (!wok || r.DelayFrom(tm) < wd) {
				fail("inexact ReserveN(%d): OK %v Delay %v, the bucket %v %v", n, r.OK(), r.DelayFrom(tm), wok, wd)
			}
			if !r.OK() {
				o = before
			}
		}
	}
	return cmps, atClamp
}

// a91Float32Units reports whether MaxDebt md of pol's rate, in the
// count-min's units for a short fraction (internal/units: 1000 x den /
// gcd(1000 x den, num) a token), is a float32.
func a91Float32Units(pol a66Pol, md float64) bool {
	n := big.NewInt(1000 * pol.den)
	g := new(big.Int).GCD(nil, nil, n, big.NewInt(pol.num))
	u := float64(n.Quo(n, g).Int64())
	mdU := md * u
	return float64(float32(mdU)) == mdU
}
