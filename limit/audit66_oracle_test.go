package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a66Oracle is the exact bucket of the package doc's "Tiers and changing
// the limit": a key's debt is held as time to drain (ms, rational), at
// New's rate; a policy (r, b) charges 1000/r ms a token against a burst
// of b x 1000/r ms, and the debt never exceeds MaxDebt x 1000/R ms.
type a66Oracle struct {
	d   *big.Rat // debt, in ms of drain
	at  int64    // ms
	max *big.Rat // MaxDebt in ms
}

func (o *a66Oracle) clone() *a66Oracle {
	return &a66Oracle{d: new(big.Rat).Set(o.d), at: o.at, max: o.max}
}

func (o *a66Oracle) advance(ms int64) {
	if ms <= o.at {
		return
	}
	o.d.Sub(o.d, big.NewRat(ms-o.at, 1))
	if o.d.Sign() < 0 {
		o.d.SetInt64(0)
	}
	o.at = ms
}

// a66Pol is a policy: rate num/den per second, burst b.
type a66Pol struct {
	num, den int64
	b        int
}

func (p a66Pol) limit() limit.Limit { return limit.Limit(float64(p.num) / float64(p.den)) }

// cost is 1000/r ms per token.
func (p a66Pol) cost() *big.Rat { return big.NewRat(1000*p.den, p.num) }

func (p a66Pol) burstMs() *big.Rat {
	return new(big.Rat).Mul(p.cost(), big.NewRat(int64(p.b), 1))
}

func a66Ceil(x *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func a66Floor(x *big.Rat) int64 { return new(big.Int).Div(x.Num(), x.Denom()).Int64() }

func a66ms(x int64) time.Duration { return time.Duration(x) * time.Millisecond }

// fill computes Remaining, ResetAfter, NextAfter for debt d under p.
func (p a66Pol) fill(d *big.Rat, dec *limit.Decision) {
	c := p.cost()
	// Remaining = floor(b - d/c)
	rem := a66Floor(new(big.Rat).Sub(big.NewRat(int64(p.b), 1), new(big.Rat).Quo(d, c)))
	dec.Remaining = int(max(rem, 0))
	dec.ResetAfter, dec.NextAfter = 0, 0
	if d.Sign() > 0 {
		dec.ResetAfter = a66ms(a66Ceil(d))
		// d - x <= (b - (rem+1)) c
		tgt := new(big.Rat).Mul(c, big.NewRat(int64(p.b-dec.Remaining-1), 1))
		x := new(big.Rat).Sub(d, tgt)
		if x.Sign() > 0 {
			dec.NextAfter = a66ms(a66Ceil(x))
		}
	}
}

// decide is DecideN (commit) or PeekN under p with RejectCost rc tokens.
func (o *a66Oracle) decide(p a66Pol, n int, rc int64, commit bool) limit.Decision {
	dec := limit.Decision{Limit: p.limit(), Burst: p.b}
	c := p.cost()
	d := new(big.Rat).Set(o.d)
	addReject := func() {
		if commit && rc > 0 {
			d.Add(d, new(big.Rat).Mul(c, big.NewRat(rc, 1)))
			if d.Cmp(o.max) > 0 {
				d.Set(o.max)
			}
		}
	}
	nc := new(big.Rat).Mul(c, big.NewRat(int64(n), 1))
	switch {
	case n > p.b:
		dec.Never, dec.RetryAfter = true, limit.InfDuration
		addReject()
	case new(big.Rat).Add(d, nc).Cmp(p.burstMs()) <= 0:
		dec.Allowed = true
		d.Add(d, nc)
	default:
		addReject()
		x := new(big.Rat).Add(d, nc)
		x.Sub(x, p.burstMs())
		dec.RetryAfter = a66ms(max(a66Ceil(x), 1))
	}
	p.fill(d, &dec)
	if commit {
		o.d = d
	}
	return dec
}

// reserve returns ok and the delay of ReserveN(n) under p.
func (o *a66Oracle) reserve(p a66Pol, n int) (bool, time.Duration) {
	if n > p.b {
		return false, limit.InfDuration
	}
	d := new(big.Rat).Add(o.d, new(big.Rat).Mul(p.cost(), big.NewRat(int64(n), 1)))
	if d.Cmp(o.max) > 0 {
		return false, limit.InfDuration
	}
	o.d = d
	x := new(big.Rat).Sub(d, p.burstMs())
	if x.Sign() <= 0 {
		return true, 0
	}
	return true, a66ms(a66Ceil(x))
}

type a66Cfg struct {
	name   string
	pol    a66Pol // New's
	maxDbt float64
	rc     int64
	opts   []limit.Option
	// policies SetLimit/SetBurst/Tier may pick
	alts []a66Pol
}

func a66Configs() []a66Cfg {
	third := a66Pol{1, 3, 4}
	return []a66Cfg{
		{name: "third/cm", pol: third, maxDbt: 40, opts: []limit.Option{limit.WithEngine(limit.CountMin)},
			alts: []a66Pol{{1, 6, 4}, {1, 3, 10}, {2, 3, 4}, {1, 9, 2}, {1, 3, 1}, {3, 7, 3}}},
		{name: "third/auto", pol: a66Pol{1, 3, 4}, maxDbt: 8,
			alts: []a66Pol{{1, 6, 2}, {1, 3, 8}, {2, 3, 4}, {1, 3, 1}}},
		{name: "0.3/auto", pol: a66Pol{3, 10, 5}, maxDbt: 10, rc: 1,
			alts: []a66Pol{{3, 20, 5}, {3, 10, 9}, {3, 5, 7}, {1, 10, 3}}},
		{name: "0.3/cm", pol: a66Pol{3, 10, 50}, maxDbt: 400, rc: 2, opts: []limit.Option{limit.WithEngine(limit.CountMin)},
			alts: []a66Pol{{3, 20, 50}, {3, 10, 100}, {3, 5, 70}, {1, 10, 30}, {3, 80, 40}}},
		{name: "7/13ms/auto", pol: a66Pol{7000, 13, 30}, maxDbt: 60,
			alts: []a66Pol{{3500, 13, 30}, {7000, 13, 60}, {14000, 13, 5}, {1000, 1, 10}}},
		{name: "7/13ms/cm", pol: a66Pol{7000, 13, 300}, maxDbt: 3000, rc: 3, opts: []limit.Option{limit.WithEngine(limit.CountMin)},
			alts: []a66Pol{{3500, 13, 300}, {7000, 13, 1000}, {14000, 13, 50}, {7000, 39, 100}}},
		{name: "10/s/buckets", pol: a66Pol{10, 1, 20}, maxDbt: 80, rc: 1, opts: []limit.Option{limit.WithEngine(limit.Buckets)},
			alts: []a66Pol{{5, 2, 20}, {10, 1, 80}, {20, 1, 3}, {5, 1, 40}, {10, 3, 7}}},
		{name: "huge/cm", pol: a66Pol{1000, 1, 1 << 22}, maxDbt: 1 << 23, opts: []limit.Option{limit.WithEngine(limit.CountMin)},
			alts: []a66Pol{{500, 1, 1 << 22}, {1000, 1, 1 << 23}, {2000, 1, 100}}},
		{name: "max-burst/auto", pol: a66Pol{1_000_000, 1, 1 << 24}, maxDbt: 1 << 24,
			alts: []a66Pol{{2_000_000, 1, 1 << 24}, {1_000_000, 1, 3}, {3_000_000, 7, 1 << 20}}},
		{name: "every1500us/auto", pol: a66Pol{2000, 3, 50}, maxDbt: 100, rc: 2,
			alts: []a66Pol{{1000, 3, 50}, {2000, 3, 100}, {4000, 3, 10}, {200, 3, 5}}},
		{name: "every1500us/cm", pol: a66Pol{2000, 3, 500}, maxDbt: 1000, opts: []limit.Option{limit.WithEngine(limit.CountMin)},
			alts: []a66Pol{{1000, 3, 500}, {2000, 3, 1000}, {4000, 3, 10}, {200, 3, 50}}},
		{name: "every140ms/buckets", pol: a66Pol{50, 7, 50}, maxDbt: 200, rc: 3, opts: []limit.Option{limit.WithEngine(limit.Buckets)},
			alts: []a66Pol{{25, 7, 50}, {50, 7, 200}, {100, 7, 20}, {1000, 7, 30}}},
	}
}

// TestAudit66OracleMixed drives one key through a random sequence of
// DecideN, PeekN, AllowN, ReserveN (+ Cancel after partial time),
// SetLimit/SetBurst and Tier decisions, with idle gaps up to years, and
// compares every number with the exact rational bucket whenever the
// policy used reports Exact (package doc, "Exactness" and "Tiers and
// changing the limit").
func TestAudit66OracleMixed(t *testing.T) {
	testsize.Serial(t)
	for _, cfg := range a66Configs() {
		t.Run(cfg.name, func(t *testing.T) {
			checked, seeds := 0, testsize.Sample(12, 4, 2)
			for seed := uint64(0); seed < uint64(seeds); seed++ {
				checked += a66Run(t, cfg, seed)
			}
			if checked < 50*seeds/12 {
				t.Fatalf("only %d exact comparisons", checked)
			}
			t.Logf("%d exact comparisons", checked)
		})
	}
}

func a66Run(t *testing.T, cfg a66Cfg, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 66))
	clk := sketchtest.NewFakeClock()
	now := int64(1_000_000)
	clk.Set(now)
	opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithMaxDebt(cfg.maxDbt)}, cfg.opts...)
	if cfg.rc > 0 {
		opts = append(opts, limit.WithRejectCost(float64(cfg.rc)))
	}
	l, err := limit.New(cfg.pol.limit(), cfg.pol.b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() {
		t.Fatalf("New(%v, %d) not Exact on %v", cfg.pol.limit(), cfg.pol.b, l.Engine())
	}
	maxMs := new(big.Rat).Mul(cfg.pol.cost(), new(big.Rat).SetFloat64(cfg.maxDbt))
	o := &a66Oracle{d: new(big.Rat), at: now, max: maxMs}
	cur := cfg.pol
	tiers := map[int]*limit.Tier{}
	key := fmt.Sprintf("k%d", seed)
	checked := 0
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log
		if len(tail) > 12 {
			tail = tail[len(tail)-12:]
		}
		t.Fatalf("seed %d engine %v: "+format+"\nlast ops:\n%v", append([]any{seed, l.Engine()}, append(args, tail)...)...)
	}
	for step := 0; step < 400; step++ {
		switch x := rng.IntN(100); {
		case x < 40:
			now += int64(rng.IntN(3))
		case x < 85:
			now += int64(rng.IntN(int(a66Ceil(cur.burstMs())) + 2))
		case x < 93:
			now += int64(rng.IntN(200_000))
		case x < 97:
			now += 86_400_000 * int64(1+rng.IntN(3))
		default:
			now += 365 * 86_400_000 * int64(1+rng.IntN(3))
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
					t.Fatalf("Tier %v: %v", pol, err)
				}
				tiers[i] = tr
			}
			tier = tiers[i]
		}
		exact := l.Exact()
		if tier != nil {
			exact = tier.Exact()
		}
		n := 1 + rng.IntN(pol.b+1)
		if rng.IntN(4) == 0 {
			n = 1
		}
		op := rng.IntN(10)
		log = append(log, fmt.Sprintf("t=%d pol=%v tier=%v op=%d n=%d debt=%s", now, pol, tier != nil, op, n, o.d.FloatString(3)))
		switch op {
		case 0, 1, 2, 3: // DecideN
			var got limit.Decision
			if tier != nil {
				got = tier.DecideN(tm, key, n)
			} else {
				got = l.DecideN(tm, key, n)
			}
			want := o.decide(pol, n, cfg.rc, true)
			got.Policy = ""
			if exact {
				checked++
				if got != want {
					fail("DecideN(%d) under %v:\n got %+v\nwant %+v", n, pol, got, want)
				}
			} else {
				return checked // the oracle no longer holds the debt exactly
			}
		case 4: // PeekN
			var got limit.Decision
			if tier != nil {
				got = tier.PeekN(tm, key, n)
			} else {
				got = l.PeekN(tm, key, n)
			}
			want := o.decide(pol, n, cfg.rc, false)
			got.Policy = ""
			if exact {
				checked++
				if got != want {
					fail("PeekN(%d) under %v:\n got %+v\nwant %+v", n, pol, got, want)
				}
			}
		case 5: // AllowN
			var ok bool
			if tier != nil {
				ok = tier.AllowN(tm, key, n)
			} else {
				ok = l.AllowN(tm, key, n)
			}
			want := o.decide(pol, n, cfg.rc, true)
			if !exact {
				return checked
			}
			checked++
			if ok != want.Allowed {
				fail("AllowN(%d) under %v = %v, want %v", n, pol, ok, want.Allowed)
			}
		case 6, 7: // ReserveN, maybe Cancel after partial time
			var r *limit.Reservation
			if tier != nil {
				r = tier.ReserveN(tm, key, n)
			} else {
				r = l.ReserveN(tm, key, n)
			}
			before := o.clone()
			wok, wdelay := o.reserve(pol, n)
			if !exact {
				if r.OK() {
					r.Cancel()
				}
				return checked
			}
			checked++
			if r.OK() != wok || r.DelayFrom(tm) != wdelay {
				fail("ReserveN(%d) under %v: OK %v Delay %v, want %v %v", n, pol, r.OK(), r.DelayFrom(tm), wok, wdelay)
			}
			if wok && o.d.Cmp(o.max) < 0 && rng.IntN(2) == 0 {
				// Cancel after partial time, nothing else touching the key.
				now += int64(rng.IntN(int(a66Ceil(cur.burstMs())) + 2))
				clk.Set(now)
				r.Cancel()
				before.advance(now)
				o = before
				log = append(log, fmt.Sprintf("  cancel at %d", now))
				// The key reads as if the reservation was never taken.
				tk := l.TokensAt(l.Now(), key)
				wt, _ := new(big.Rat).Sub(big.NewRat(int64(cur.b), 1), new(big.Rat).Quo(o.d, cur.cost())).Float64()
				if l.Exact() && math.Abs(tk-wt) > 1e-6*math.Max(1, math.Abs(wt)) {
					fail("TokensAt after Cancel = %v, want %v", tk, wt)
				}
			}
		case 8: // SetLimit / SetBurst
			alt := cfg.alts[rng.IntN(len(cfg.alts))]
			var err error
			if rng.IntN(2) == 0 {
				err = l.SetLimit(alt.limit())
				if err == nil {
					cur.num, cur.den = alt.num, alt.den
				}
			} else {
				err = l.SetBurst(alt.b)
				if err == nil {
					cur.b = alt.b
				}
			}
			if err != nil {
				// must be a MaxDebtError: the policy does not fit.
				if new(big.Rat).Mul(big.NewRat(int64(alt.b), 1), alt.cost()).Cmp(o.max) <= 0 && false {
					fail("Set: %v", err)
				}
			}
			log = append(log, fmt.Sprintf("  set -> %v (err %v) exact %v", cur, err, l.Exact()))
			if l.Limit() != cur.limit() || l.Burst() != cur.b {
				fail("after Set: Limit %v Burst %d, want %v %d", l.Limit(), l.Burst(), cur.limit(), cur.b)
			}
		case 9: // Tokens
			var tk float64
			if tier != nil {
				tk = tier.TokensAt(tm, key)
			} else {
				tk = l.TokensAt(tm, key)
			}
			wt, _ := new(big.Rat).Sub(big.NewRat(int64(pol.b), 1), new(big.Rat).Quo(o.d, pol.cost())).Float64()
			if exact && math.Abs(tk-wt) > 1e-6*math.Max(1, math.Abs(wt)) {
				fail("TokensAt under %v = %v, want %v", pol, tk, wt)
			}
		}
	}
	return checked
}
