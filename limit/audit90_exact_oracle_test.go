package limit_test

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a90Decide is DecideN (commit) or PeekN under p on the rational bucket
// o (a66Oracle: debt in ms of drain, capped at MaxDebt), with a RejectCost
// of rc tokens of p (a rational: the float64's own value). force < 0
// decides as the bucket does; force 0 or 1 imposes a denial or an
// admission (an inexact limiter's own outcome, so that the bucket follows
// its history and stays at or below its debt). It returns the fields the
// bucket reports and whether the bucket itself would have admitted.
func a90Decide(o *a66Oracle, p a66Pol, n int, rc *big.Rat, commit bool, force int) (limit.Decision, bool) {
	dec := limit.Decision{Limit: p.limit(), Burst: p.b}
	c := p.cost()
	d := new(big.Rat).Set(o.d)
	nc := new(big.Rat).Mul(c, big.NewRat(int64(n), 1))
	fits := n <= p.b && new(big.Rat).Add(d, nc).Cmp(p.burstMs()) <= 0
	admit := fits
	if force >= 0 {
		admit = force == 1
	}
	reject := func() {
		if commit && rc.Sign() > 0 {
			d.Add(d, new(big.Rat).Mul(c, rc))
			if d.Cmp(o.max) > 0 {
				d.Set(o.max)
			}
		}
	}
	switch {
	case n > p.b:
		dec.Never, dec.RetryAfter = true, limit.InfDuration
		reject()
	case admit:
		dec.Allowed = true
		d.Add(d, nc)
	default:
		reject()
		x := new(big.Rat).Add(d, nc)
		x.Sub(x, p.burstMs())
		dec.RetryAfter = a66ms(max(a66Ceil(x), 1))
	}
	p.fill(d, &dec)
	if commit {
		o.d = d
	}
	return dec, fits
}

// a90Cfg is one limiter under test: New's policy, MaxDebt (0: the
// default, max(2 x burst, burst + RejectCost)), RejectCost and engine,
// and the policies SetLimit, SetBurst and Tier pick from.
type a90Cfg struct {
	pol  a66Pol
	md   float64
	rc   float64
	rcR  *big.Rat // the RejectCost meant: 1/3 for 1.0/3, 1/10000 for 1e-4
	eng  limit.Engine
	opt  bool // WithStrict(false)
	alts []a66Pol
}

func (c a90Cfg) String() string {
	return fmt.Sprintf("%d/%ds-b%d-md%v-rc%v-%v-optimistic=%v", c.pol.num, c.pol.den, c.pol.b, c.md, c.rc, c.eng, c.opt)
}

func (c a90Cfg) build(clk *limittest.FakeClock, seed uint64) (*limit.Limiter, error) {
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(c.eng), limit.WithRejectCost(c.rc), limit.WithStrict(!c.opt)}
	if c.md != 0 {
		opts = append(opts, limit.WithMaxDebt(c.md))
	}
	if c.eng == limit.CountMin {
		opts = append(opts, limit.WithSize(2, 512))
	} else {
		opts = append(opts, limit.WithCapacity(64, 0.01))
	}
	return limit.New(c.pol.limit(), c.pol.b, opts...)
}

// a90Configs draws n configurations (fixed seed) over rates whose
// tokens are whole, fractional and odd numbers of ms, bursts, MaxDebts
// (default, = burst, above it) and RejectCosts: whole, halves, quarters,
// thirds (float64 1/3), tiny (1e-4, 2^-10, 2^-20), just under MaxDebt,
// MaxDebt itself, and above the burst (a default MaxDebt of burst +
// RejectCost).
func a90Configs(n int) []a90Cfg {
	rates := []a66Pol{{10, 1, 0}, {1000, 1, 0}, {1, 1, 0}, {1, 3, 0}, {3, 10, 0}, {2000, 3, 0},
		{50, 7, 0}, {7000, 13, 0}, {1, 60, 0}, {4, 1, 0}, {1000, 7, 0}, {5000, 1, 0}}
	bursts := []int{1, 2, 3, 7, 20, 64}
	rng := rand.New(rand.NewPCG(90, 1))
	var out []a90Cfg
	for len(out) < n {
		p := rates[rng.IntN(len(rates))]
		p.b = bursts[rng.IntN(len(bursts))]
		b := float64(p.b)
		var md float64
		switch rng.IntN(4) {
		case 1:
			md = b
		case 2:
			md = 2*b + 1.5
		case 3:
			md = 4 * b
		}
		eff := md // the MaxDebt the RejectCost must fit
		if md == 0 {
			eff = 2 * b
		}
		rcs := []float64{0, 1, 2, 0.5, 1.5, 0.25, 1.0 / 3, 2.0 / 3, 1e-4, 1.0 / 1024, math.Ldexp(1, -20),
			eff - 0.5, eff, eff - b, 0.75 * eff}
		rc := rcs[rng.IntN(len(rcs))]
		if md == 0 && rng.IntN(4) == 0 {
			rc = b + 0.5*float64(1+rng.IntN(4)) // the default MaxDebt becomes burst + RejectCost
		}
		if rc < 0 {
			continue
		}
		rcR := new(big.Rat).SetFloat64(rc)
		switch rc {
		case 1.0 / 3:
			rcR = big.NewRat(1, 3)
		case 2.0 / 3:
			rcR = big.NewRat(2, 3)
		case 1e-4:
			rcR = big.NewRat(1, 10000)
		}
		eng := limit.Buckets
		if rng.IntN(2) == 0 {
			eng = limit.CountMin
		}
		alts := []a66Pol{
			{p.num, p.den * 2, p.b}, {p.num * 2, p.den, p.b}, {p.num, p.den * 3, max(1, p.b/2)},
			{p.num * 3, p.den * 2, p.b}, {1000, 1, max(1, p.b/3)}, {p.num, p.den, max(1, p.b/2)},
			{p.num, p.den, p.b + 1}, {p.num, p.den, p.b}, {p.num * 5, p.den * 4, p.b},
		}
		out = append(out, a90Cfg{pol: p, md: md, rc: rc, rcR: rcR, eng: eng, opt: rng.IntN(5) == 0, alts: alts})
	}
	return out
}

// TestAudit90ExactOracleRejectCost: the package doc ("Exactness",
// limit/doc.go:82-88), Limiter.Exact (units.go) and Tier.Exact (tier.go)
// promise that, when Exact reports true, every decision and every
// RetryAfter, ResetAfter, NextAfter and Remaining of a key alone in its
// cells is the rational bucket's, a denial's RejectCost included
// (WithRejectCost: "debits c tokens of debt on every denial", at most
// MaxDebt); and that otherwise decisions "are never earlier than the
// exact bucket's". Over random configurations (both engines, strict and
// optimistic; whole,
// half, third, tiny and near-MaxDebt RejectCosts; default, tight and
// loose MaxDebts) and a random schedule of DecideN, PeekN, AllowN,
// ReserveN (+ Cancel), TokensAt, SetLimit, SetBurst, Tier decisions and
// snapshot round trips: exact policies match the a66Oracle bucket field
// for field (Exact re-read after every SetLimit/SetBurst and restore);
// inexact ones never admit what the bucket denies, and never report a
// shorter RetryAfter or ResetAfter or a larger Remaining than the bucket
// that follows their own outcomes.
func TestAudit90ExactOracleRejectCost(t *testing.T) {
	testsize.Serial(t)
	var built, exactCmp, inexactCmp int
	cfgs := a90Configs(160)
	for i, cfg := range cfgs {
		if !testsize.Keep(i, 4) {
			continue
		}
		clk := limittest.NewFakeClock()
		clk.Set(3_000_000)
		if _, err := cfg.build(clk, 1); err != nil {
			continue // e.g. Buckets cannot hold this rate and MaxDebt
		}
		built++
		e, ie := a90Run(t, cfg, uint64(i))
		exactCmp += e
		inexactCmp += ie
	}
	if k := len(cfgs) / testsize.Pick(1, 4); built < k/2 || exactCmp < 30*k || inexactCmp < 6*k {
		t.Fatalf("too little checked: %d limiters, %d exact and %d inexact comparisons", built, exactCmp, inexactCmp)
	}
	t.Logf("%d limiters, %d exact and %d inexact comparisons", built, exactCmp, inexactCmp)
}

func a90Run(t *testing.T, cfg a90Cfg, seed uint64) (exactCmp, inexactCmp int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9090))
	clk := limittest.NewFakeClock()
	now := int64(3_000_000)
	clk.Set(now)
	l, err := cfg.build(clk, seed)
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.rcR
	o := &a66Oracle{d: new(big.Rat), at: now, max: new(big.Rat).Mul(cfg.pol.cost(), new(big.Rat).SetFloat64(l.MaxDebt()))}
	cur := cfg.pol
	tiers := map[int]*limit.Tier{}
	const key = "k"
	tainted := false // the key's debt may be above the bucket's
	// costExact reports whether pol's cost is exact on l's units: a
	// limiter as l without RejectCost, at l's MaxDebt, holds it exactly.
	costOK := map[a66Pol]bool{}
	costExact := func(pol a66Pol) bool {
		if v, ok := costOK[pol]; ok {
			return v
		}
		c := cfg
		c.rc, c.md = 0, l.MaxDebt()
		s, err := c.build(limittest.NewFakeClock(), 0)
		if err != nil {
			t.Fatalf("%v without RejectCost: %v", cfg, err)
		}
		tr, err := s.Tier("", pol.limit(), pol.b)
		costOK[pol] = err == nil && tr.Exact()
		return costOK[pol]
	}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log
		if len(tail) > 14 {
			tail = tail[len(tail)-14:]
		}
		t.Fatalf("%v (engine %v, seed %d): "+format+"\nlast ops:\n%q", append([]any{cfg, l.Engine(), seed}, append(args, tail)...)...)
	}
	// checkSet checks a policy change: the policy read back, and its
	// Exact against a Tier of the same policy's.
	checkSet := func(what string) {
		log = append(log, fmt.Sprintf("  %s -> %v exact %v", what, cur, l.Exact()))
		if l.Limit() != cur.limit() || l.Burst() != cur.b {
			fail("after %s: Limit %v Burst %d, want %v %d", what, l.Limit(), l.Burst(), cur.limit(), cur.b)
		}
		tr, err := l.Tier("", cur.limit(), cur.b)
		if err != nil {
			fail("after %s, Tier of the same policy: %v", what, err)
		}
		if tr.Exact() != l.Exact() {
			fail("after %s: Limiter.Exact %v, a Tier of the same policy %v", what, l.Exact(), tr.Exact())
		}
	}
	for step := 0; step < 160; step++ {
		switch x := rng.IntN(100); {
		case x < 45:
			now += int64(rng.IntN(2))
		case x < 90:
			now += int64(rng.IntN(int(a66Ceil(cur.burstMs())) + 2))
		default:
			now += int64(rng.IntN(100_000))
		}
		clk.Set(now)
		o.advance(now)
		tm := l.Now()
		pol := cur
		var tier *limit.Tier
		if rng.IntN(5) == 0 {
			i := rng.IntN(len(cfg.alts))
			pol = cfg.alts[i]
			if tiers[i] == nil {
				tr, err := l.Tier(fmt.Sprintf("t%d", i), pol.limit(), pol.b)
				if err != nil {
					continue // the tier's burst does not fit MaxDebt
				}
				tiers[i] = tr
			}
			tier = tiers[i]
		}
		exact := l.Exact()
		if tier != nil {
			exact = tier.Exact()
		}
		polExact := exact
		// A commit of an inexact policy leaves the key's debt above the
		// bucket's (its rounded costs: "a key shared with it counts its
		// burst at the rounded cost", doc.go), until that debt has
		// drained to 0: no exact comparison before then.
		if tainted && l.TokensAt(tm, key) == float64(cur.b) {
			tainted = false
			if o.d.Sign() != 0 {
				fail("the limiter's debt drained to 0 before the bucket's %s ms", o.d.FloatString(3))
			}
		}
		exact = exact && !tainted
		taint := func() {
			tainted = tainted || !polExact
		}
		n := 1 + rng.IntN(pol.b+1)
		if rng.IntN(3) == 0 {
			n = 1
		}
		op := rng.IntN(12)
		log = append(log, fmt.Sprintf("t=%d pol=%v tier=%v exact=%v op=%d n=%d debt=%s", now, pol, tier != nil, exact, op, n, o.d.FloatString(4)))
		// An inexact cost is "never early against its own bucket" (its
		// rounded cost), not the rational one: only a policy whose cost is
		// exact (inexact, if at all, by its RejectCost) is compared.
		cmp := exact || costExact(pol)
		switch op {
		case 0, 1, 2, 3, 4: // DecideN, PeekN
			commit := op != 4
			var got limit.Decision
			switch {
			case tier != nil && commit:
				got = tier.DecideN(tm, key, n)
			case tier != nil:
				got = tier.PeekN(tm, key, n)
			case commit:
				got = l.DecideN(tm, key, n)
			default:
				got = l.PeekN(tm, key, n)
			}
			got.Policy = ""
			if commit {
				taint()
			}
			if exact {
				exactCmp++
				if want, _ := a90Decide(o, pol, n, rc, commit, -1); got != want {
					fail("DecideN/PeekN(%d) (commit %v) under %v:\n got %+v\nwant %+v", n, commit, pol, got, want)
				}
				continue
			}
			force := 0
			if got.Allowed {
				force = 1
			}
			// The bucket follows the limiter's outcome, at the exact cost
			// (an inexact one charges more): it stays at or below the
			// limiter's debt.
			want, fits := a90Decide(o, pol, n, rc, commit, force)
			if !cmp {
				continue
			}
			inexactCmp++
			if got.Allowed && !fits || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter || got.Remaining > want.Remaining ||
				got.Never != want.Never {
				fail("inexact DecideN/PeekN(%d) (commit %v) under %v earlier than the bucket:\n got %+v\nwant %+v", n, commit, pol, got, want)
			}
		case 5: // AllowN
			var ok bool
			if tier != nil {
				ok = tier.AllowN(tm, key, n)
			} else {
				ok = l.AllowN(tm, key, n)
			}
			taint()
			force := -1
			if !exact {
				force = 0
				if ok {
					force = 1
				}
			}
			want, fits := a90Decide(o, pol, n, rc, true, force)
			switch {
			case exact:
				exactCmp++
			case cmp:
				inexactCmp++
			}
			if exact && ok != want.Allowed || cmp && ok && !fits {
				fail("AllowN(%d) under %v = %v, the bucket %v", n, pol, ok, fits)
			}
		case 6, 7: // ReserveN, maybe Cancel after a while
			var r *limit.Reservation
			if tier != nil {
				r = tier.ReserveN(tm, key, n)
			} else {
				r = l.ReserveN(tm, key, n)
			}
			taint()
			before := o.clone()
			wok, wdelay := o.reserve(pol, n)
			if exact {
				exactCmp++
				if r.OK() != wok || r.DelayFrom(tm) != wdelay {
					fail("ReserveN(%d) under %v: OK %v Delay %v, want %v %v", n, pol, r.OK(), r.DelayFrom(tm), wok, wdelay)
				}
			} else {
				if cmp {
					inexactCmp++
				}
				if r.OK() && (!wok || cmp && r.DelayFrom(tm) < wdelay) {
					fail("inexact ReserveN(%d) under %v: OK %v Delay %v, the bucket %v %v", n, pol, r.OK(), r.DelayFrom(tm), wok, wdelay)
				}
				if !r.OK() {
					o = before // nothing taken
				}
			}
			if r.OK() && o.d.Cmp(o.max) < 0 && rng.IntN(2) == 0 {
				now += int64(rng.IntN(int(a66Ceil(cur.burstMs())) + 2))
				clk.Set(now)
				r.Cancel()
				taint()
				before.advance(now)
				o = before
				log = append(log, fmt.Sprintf("  cancel at %d", now))
			}
		case 8: // SetLimit / SetBurst
			alt := cfg.alts[rng.IntN(len(cfg.alts))]
			if rng.IntN(2) == 0 {
				if l.SetLimit(alt.limit()) == nil {
					cur.num, cur.den = alt.num, alt.den
				}
				checkSet(fmt.Sprintf("SetLimit(%v)", alt.limit()))
			} else {
				if l.SetBurst(alt.b) == nil {
					cur.b = alt.b
				}
				checkSet(fmt.Sprintf("SetBurst(%d)", alt.b))
			}
		case 9, 10: // TokensAt
			var tk float64
			if tier != nil {
				tk = tier.TokensAt(tm, key)
			} else {
				tk = l.TokensAt(tm, key)
			}
			wt, _ := new(big.Rat).Sub(big.NewRat(int64(pol.b), 1), new(big.Rat).Quo(o.d, pol.cost())).Float64()
			// TokensAt is not among Exact's numbers: a Buckets clamp at a
			// MaxDebt that is no whole number of ticks reads below it by
			// less than a tick (at most 1 ms).
			costMs, _ := pol.cost().Float64()
			tol := 1e-6*math.Max(1, math.Abs(wt)) + 1/costMs
			if exact && math.Abs(tk-wt) > tol || cmp && tk > wt+tol {
				fail("TokensAt under %v = %v, the bucket %v (exact %v)", pol, tk, wt, exact)
			}
		case 11: // a snapshot round trip into a fresh limiter of the same configuration
			if rng.IntN(4) != 0 {
				continue
			}
			var buf bytes.Buffer
			if _, err := l.WriteTo(&buf); err != nil {
				fail("WriteTo: %v", err)
			}
			l2, err := cfg.build(clk, seed+1000)
			if err != nil {
				fail("rebuild: %v", err)
			}
			if _, err := l2.ReadFrom(&buf); err != nil {
				fail("ReadFrom: %v", err)
			}
			if err := l2.SetBurst(1); err != nil {
				fail("restored SetBurst(1): %v", err)
			}
			if err := l2.SetLimit(cur.limit()); err != nil {
				fail("restored SetLimit(%v): %v", cur.limit(), err)
			}
			if err := l2.SetBurst(cur.b); err != nil {
				fail("restored SetBurst(%d): %v", cur.b, err)
			}
			if l2.Exact() != l.Exact() {
				fail("restored limiter under %v: Exact %v, the original's %v", cur, l2.Exact(), l.Exact())
			}
			l = l2
			clear(tiers)
			checkSet("restore")
		}
	}
	return exactCmp, inexactCmp
}
