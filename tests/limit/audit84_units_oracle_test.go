package limit_test

// Audit 84 (units): the exactness predicate and the unit choice at their
// boundaries (limit/doc.go, "Engines" and "Exactness"; internal/units).
//
// The harness derives, from the documentation alone and in big.Int
// arithmetic, what a configuration must be: a token of a short fraction
// p/q per second lasts 1000q/p ms = c/k in lowest terms (c units of a
// millisecond's drain k); the count-min is exact iff MaxDebt x c <= 2^24;
// Auto picks Buckets iff k <= 16384, MaxDebt x c <= 61,438 and
// floor(MaxDebt x c) + k <= 65,534 (whole ticks, a millisecond beside the
// span). Otherwise the limiter keeps the fraction's units when a float32
// adds MaxDebt tokens of them exactly (the unit's odd part's bits plus
// MaxDebt's <= 24, drain <= 4096: "float32" regime, a stored debt rounded
// up by less than 2^-23 of itself per write while in debt) or rounds the
// rate down by less than 2^(1-m) of itself, m = max(24 - bits(MaxDebt), 8)
// ("rate" regime; adds may round too beyond MaxDebt 65535).
//
// A key alone in a large limiter is driven by a seeded schedule of
// DecideN, PeekN, ReserveN (queueing up to MaxDebt), n > burst and
// retries at RetryAfter and 1 ms before, on a fake clock that only moves
// forward. The oracle is the rational bucket in tokens (big.Rat). When
// Exact() is true every field must equal it. When false, two oracles fed
// the limiter's own admissions sandwich it: "fast" (the exact rate) must
// admit whatever the limiter admits (never early), "slow" (the rate less
// the documented rounding, each write inflated by 2^-23 where the doc
// says stored debts round) must be admitted by the limiter (late at most
// by the documented bound); RetryAfter, ResetAfter and reservation delays
// lie between theirs, Remaining too. A full burst is admitted at once
// from an empty key, and RetryAfter predicts the limiter's next decision.

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

type audit84unitsCfg struct {
	name    string
	lim     limit.Limit
	p, q    int64   // the rate is exactly p/q per second; q == 0: not a short fraction (the float itself)
	burst   int     //
	maxDebt float64 // 0: the default
	rc      int     // RejectCost in tokens
	eng     limit.Engine
	extra   []limit.Option
}

// audit84unitsPred is what the documentation says of a configuration.
type audit84unitsPred struct {
	md      *big.Rat // MaxDebt in tokens
	r       *big.Rat // the rate, tokens per second
	short   bool
	c, k    *big.Int // token = c/k ms, lowest terms (short only)
	exactCM bool     // MaxDebt x c <= 2^24
	buckets bool     // Auto picks Buckets
	regime  string   // "exact", "float32", "rate"
	m       int      // significant bits of the rounded token ("rate")
	inflate bool     // stored debts may round up on writes
	ambCM   bool     // MaxDebt x c within a float64 rounding of 2^24
	ambB    bool     // within a float64 rounding of a Buckets edge
	mdCeil  uint64
}

func audit84unitsPredict(c audit84unitsCfg, cmOnly bool) audit84unitsPred {
	var p audit84unitsPred
	b := float64(c.burst)
	md := c.maxDebt
	if md == 0 {
		md = max(min(2*b, 1<<24), b+float64(c.rc))
	}
	p.md = new(big.Rat).SetFloat64(md)
	mdCeil := uint64(math.Ceil(md))
	p.m = max(24-bits.Len64(mdCeil), 8)
	if c.q != 0 {
		p.short = true
		p.r = big.NewRat(c.p, c.q)
		tok := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(1000), big.NewInt(c.q)), big.NewInt(c.p))
		p.c, p.k = new(big.Int).Set(tok.Num()), new(big.Int).Set(tok.Denom())
		mdc := new(big.Rat).Mul(p.md, new(big.Rat).SetInt(p.c))
		p.exactCM = mdc.Cmp(new(big.Rat).SetInt64(1<<24)) <= 0
		// and MaxDebt in units (held as the whole number within 4 ulps of
		// the float64 product where there is one) on the grid the cells
		// hold exactly: multiples of 2^-k, k the most bits MaxDebt leaves
		// under 24 (limit/doc.go, "Exactness"; audit 91).
		if p.exactCM {
			u := md * float64(p.c.Int64())
			if r := math.Round(u); math.Abs(u-r) <= 4*(math.Nextafter(r, math.Inf(1))-r) {
				u = r
			}
			k := 0
			for k < 30 && u*math.Ldexp(1, k+1) <= 1<<24 {
				k++
			}
			if g := math.Ldexp(u, k); g != math.Trunc(g) {
				p.exactCM = false
			}
		}
		// Within a float64 rounding of an edge either side is taken (the
		// limiter forms MaxDebt x unit in float64).
		near := func(x *big.Rat, edge int64) bool {
			d := new(big.Rat).Sub(x, big.NewRat(edge, 1))
			return d.Abs(d).Cmp(big.NewRat(1, 1<<20)) < 0
		}
		p.ambCM = near(mdc, 1<<24)
		withMs := new(big.Rat).Add(mdc, new(big.Rat).SetInt(p.k))
		p.buckets = !cmOnly && p.k.Cmp(big.NewInt(16384)) <= 0 && mdc.Cmp(big.NewRat(61438, 1)) <= 0 &&
			withMs.Cmp(big.NewRat(65534, 1)) <= 0
		p.ambB = !cmOnly && p.k.Cmp(big.NewInt(16384)) <= 0 && (near(mdc, 61438) || near(withMs, 65534))
		// Buckets holds only a MaxDebt of whole ticks (audit 90), and its
		// ticks may be finer than c per token (limit.New(10, 20): 1500
		// for c = 100), which the doc does not give: a MaxDebt that is
		// not a whole number of c's may go either way.
		if x := md * float64(p.c.Int64()); p.buckets && x != math.Trunc(x) {
			p.ambB = true
		}
	} else {
		p.r = new(big.Rat).SetFloat64(float64(c.lim))
	}
	p.mdCeil = mdCeil
	p.setRegime()
	return p
}

func (p *audit84unitsPred) setRegime() {
	mdCeil := p.mdCeil
	p.inflate = false
	switch {
	case p.buckets || p.exactCM:
		p.regime = "exact"
	case p.short && p.k.Cmp(big.NewInt(4096)) <= 0 && p.c.BitLen() <= 53 &&
		bits.Len64(p.c.Uint64()>>bits.TrailingZeros64(p.c.Uint64()))+bits.Len64(mdCeil) <= 24:
		p.regime = "float32"
		p.inflate = true
	default:
		p.regime = "rate"
		p.inflate = mdCeil > 65535
	}
}

// audit84unitsOracle is a rational bucket in tokens: debt d as of at ms,
// draining r/1000 tokens per ms; writes inflate d by (1+infl) when set.
type audit84unitsOracle struct {
	d     *big.Rat
	at    int64
	rms   *big.Rat // tokens per ms
	b, md *big.Rat
	infl  *big.Rat // nil: none
}

func (o *audit84unitsOracle) val(now int64) *big.Rat {
	v := new(big.Rat).Sub(o.d, new(big.Rat).Mul(o.rms, big.NewRat(now-o.at, 1)))
	if v.Sign() < 0 {
		v.SetInt64(0)
	}
	return v
}

func (o *audit84unitsOracle) set(now int64, v *big.Rat) {
	if o.infl != nil && v.Sign() > 0 {
		v = new(big.Rat).Mul(v, o.infl)
	}
	o.d, o.at = v, now
}

// msFor is the least whole ms after which x tokens have drained (x <= 0: 0).
func (o *audit84unitsOracle) msFor(x *big.Rat) int64 {
	if x.Sign() <= 0 {
		return 0
	}
	q := new(big.Rat).Quo(x, o.rms)
	n, m := new(big.Int).DivMod(q.Num(), q.Denom(), new(big.Int))
	if m.Sign() != 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() {
		return math.MaxInt64 / 2
	}
	return n.Int64()
}

func audit84unitsFloor(x *big.Rat) int64 {
	q, _ := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	return q.Int64()
}

// decision is the bucket's Decision for n at now from debt v (after any
// RejectCost applied by the caller for a denial), as if it decided.
func (o *audit84unitsOracle) decision(v *big.Rat, n int, allowed bool, lim limit.Limit, burst int) limit.Decision {
	d := limit.Decision{Allowed: allowed, Limit: lim, Burst: burst, Policy: "default"}
	nn := big.NewRat(int64(n), 1)
	if n > burst {
		d.Never, d.RetryAfter = true, limit.InfDuration
	} else if !allowed {
		ex := new(big.Rat).Add(v, nn)
		ex.Sub(ex, o.b)
		d.RetryAfter = time.Duration(max(o.msFor(ex), 1)) * time.Millisecond
	}
	rem := audit84unitsFloor(new(big.Rat).Sub(o.b, v))
	d.Remaining = int(max(rem, 0))
	if v.Sign() > 0 {
		d.ResetAfter = time.Duration(o.msFor(v)) * time.Millisecond
		need := new(big.Rat).Add(v, big.NewRat(int64(d.Remaining+1), 1))
		need.Sub(need, o.b)
		d.NextAfter = time.Duration(o.msFor(need)) * time.Millisecond
	}
	return d
}

type audit84unitsStats struct {
	maxLateMs    int64   // largest RetryAfter - fast's
	maxLateRel   float64 // relative to fast's
	denyFastOK   int     // denials the exact bucket would admit
	decisions    int
	retries      int
	reservations int
}

// audit84unitsRun builds c and checks it; it returns the stats.
func audit84unitsRun(t *testing.T, c audit84unitsCfg, seed uint64, steps int) audit84unitsStats {
	t.Helper()
	var st audit84unitsStats
	rng := rand.New(rand.NewPCG(seed, 0x84))
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000 + int64(rng.IntN(1<<30)))
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(c.eng)}
	if c.maxDebt != 0 {
		opts = append(opts, limit.WithMaxDebt(c.maxDebt))
	}
	if c.rc > 0 {
		opts = append(opts, limit.WithRejectCost(float64(c.rc)))
	}
	opts = append(opts, c.extra...)
	cmOnly := c.eng == limit.CountMin || len(c.extra) > 0
	pr := audit84unitsPredict(c, cmOnly)
	l, err := limit.New(c.lim, c.burst, opts...)
	if c.eng == limit.Buckets {
		if pr.buckets != (err == nil) && !pr.ambB {
			t.Fatalf("%s: WithEngine(Buckets): err %v; the doc's rule says Buckets exact = %v", c.name, err, pr.buckets)
		}
		if err != nil {
			return st
		}
	} else if err != nil {
		t.Fatalf("%s: New: %v", c.name, err)
	}
	if pr.ambB {
		// either engine; the rest follows the one taken
		pr.buckets = l.Engine() == limit.Buckets
	}
	if pr.ambCM && l.Engine() == limit.CountMin {
		pr.exactCM = l.Exact()
	}
	pr.setRegime()
	if c.eng == limit.Auto && !cmOnly {
		want := limit.CountMin
		if pr.buckets {
			want = limit.Buckets
		}
		if l.Engine() != want {
			t.Errorf("%s: Engine() = %v, the doc's rule says %v (c/k = %v/%v, MaxDebt %v)", c.name, l.Engine(), want, pr.c, pr.k, pr.md.FloatString(6))
		}
	}
	wantExact := pr.regime == "exact"
	if l.Engine() == limit.CountMin {
		wantExact = pr.exactCM
	}
	if l.Exact() != wantExact {
		t.Errorf("%s: Exact() = %v on %v, the doc's rule says %v (c/k = %v/%v, MaxDebt %v, MaxDebt x c = %v)", c.name, l.Exact(), l.Engine(), wantExact,
			pr.c, pr.k, pr.md.FloatString(6), func() string {
				if pr.c == nil {
					return "-"
				}
				return new(big.Rat).Mul(pr.md, new(big.Rat).SetInt(pr.c)).FloatString(3)
			}())
		return st
	}
	exact := l.Exact()
	if l.Engine() == limit.Buckets && !exact {
		t.Errorf("%s: Buckets engine chosen but Exact() false", c.name)
	}
	rms := new(big.Rat).Quo(pr.r, big.NewRat(1000, 1))
	bR := big.NewRat(int64(c.burst), 1)
	fast := &audit84unitsOracle{d: new(big.Rat), rms: rms, b: bR, md: pr.md}
	slow := &audit84unitsOracle{d: new(big.Rat), rms: rms, b: bR, md: pr.md}
	if !exact {
		if pr.regime == "rate" {
			f := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(pr.m-1))))
			slow.rms = new(big.Rat).Mul(rms, f)
		}
		if pr.inflate {
			slow.infl = new(big.Rat).Add(big.NewRat(1, 1), new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 23)))
		}
	}
	ms := func(x int64) time.Time { return time.UnixMilli(x) }
	tokMs, _ := new(big.Rat).Quo(big.NewRat(1, 1), rms).Float64()
	mdF, _ := pr.md.Float64()
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		for _, s := range trace[max(len(trace)-12, 0):] {
			t.Log(s)
		}
		t.Fatalf("%s (regime %s, engine %v, exact %v): "+format, append([]any{c.name, pr.regime, l.Engine(), exact}, args...)...)
	}

	// A full burst at once from an empty key, in one request and as
	// burst single requests at one instant.
	now := clk.NowMillis()
	if d := l.DecideN(ms(now), "audit84units-fresh", c.burst); !d.Allowed {
		fail("full burst %d denied from an empty key: %+v", c.burst, d)
	}
	if c.burst <= 4096 {
		for i := range c.burst {
			if !l.AllowN(ms(now), "audit84units-fresh2", 1) {
				fail("single request %d of a burst of %d denied from an empty key", i+1, c.burst)
			}
		}
		if l.AllowN(ms(now), "audit84units-fresh2", 1) && c.burst < 1<<20 {
			// the exact bucket denies a burst+1-th at the same instant
			// unless a token drained within 0 ms: never.
			fail("request %d admitted at one instant (burst %d)", c.burst+1, c.burst)
		}
	}

	key := "audit84units-key"
	// check compares a Decision of the limiter with the oracles (v*: the
	// debts the decision is read from, after any RejectCost).
	check := func(where string, got limit.Decision, n int, vf, vs *big.Rat) {
		t.Helper()
		wf := fast.decision(vf, n, got.Allowed, c.lim, c.burst)
		if exact {
			if got != wf {
				fail("%s:\n got  %+v\n want %+v", where, got, wf)
			}
			return
		}
		ws := slow.decision(vs, n, got.Allowed, c.lim, c.burst)
		if got.Never != wf.Never || got.Limit != wf.Limit || got.Burst != wf.Burst {
			fail("%s: got %+v want %+v", where, got, wf)
		}
		if !got.Never && !got.Allowed {
			if got.RetryAfter < wf.RetryAfter {
				fail("%s: RetryAfter %v early: the exact bucket's is %v", where, got.RetryAfter, wf.RetryAfter)
			}
			if got.RetryAfter > max(ws.RetryAfter, time.Millisecond) {
				fail("%s: RetryAfter %v later than the documented bound %v (exact %v)", where, got.RetryAfter, ws.RetryAfter, wf.RetryAfter)
			}
			late := (got.RetryAfter - wf.RetryAfter).Milliseconds()
			st.maxLateMs = max(st.maxLateMs, late)
			if wf.RetryAfter > 0 {
				st.maxLateRel = max(st.maxLateRel, float64(late)/float64(wf.RetryAfter.Milliseconds()))
			}
		}
		if got.ResetAfter < wf.ResetAfter || got.ResetAfter > ws.ResetAfter {
			fail("%s: ResetAfter %v outside [%v, %v]", where, got.ResetAfter, wf.ResetAfter, ws.ResetAfter)
		}
		if got.Remaining > wf.Remaining || got.Remaining < ws.Remaining {
			fail("%s: Remaining %d outside [%d, %d]", where, got.Remaining, ws.Remaining, wf.Remaining)
		}
		if got.NextAfter > got.RetryAfter && !got.Allowed {
			fail("%s: NextAfter %v > RetryAfter %v", where, got.NextAfter, got.RetryAfter)
		}
	}
	// rejectCost applies RejectCost to both oracles, clamped at MaxDebt.
	reject := func(now int64, vf, vs *big.Rat) (*big.Rat, *big.Rat) {
		if c.rc == 0 {
			return vf, vs
		}
		rc := big.NewRat(int64(c.rc), 1)
		nf := new(big.Rat).Add(vf, rc)
		if nf.Cmp(pr.md) > 0 {
			nf.Set(pr.md)
		}
		ns := new(big.Rat).Add(vs, rc)
		if ns.Cmp(pr.md) > 0 {
			ns.Set(pr.md)
		}
		fast.set(now, nf)
		slow.set(now, ns)
		return fast.val(now), slow.val(now)
	}
	admit := func(now int64, vf, vs *big.Rat, n int) (*big.Rat, *big.Rat) {
		nn := big.NewRat(int64(n), 1)
		fast.set(now, new(big.Rat).Add(vf, nn))
		slow.set(now, new(big.Rat).Add(vs, nn))
		return fast.val(now), slow.val(now)
	}
	// decide runs DecideN (commit) or PeekN at now and checks it.
	decide := func(where string, now int64, n int, commit bool) limit.Decision {
		t.Helper()
		st.decisions++
		vf, vs := fast.val(now), slow.val(now)
		var got limit.Decision
		if commit {
			got = l.DecideN(ms(now), key, n)
		} else {
			got = l.PeekN(ms(now), key, n)
		}
		nn := big.NewRat(int64(n), 1)
		fOK := n <= c.burst && new(big.Rat).Add(vf, nn).Cmp(bR) <= 0
		sOK := n <= c.burst && new(big.Rat).Add(vs, nn).Cmp(bR) <= 0
		if got.Allowed && !fOK {
			fail("%s: admitted early: the exact bucket's debt %s + %d > burst %d", where, vf.FloatString(6), n, c.burst)
		}
		if !got.Allowed && sOK {
			fail("%s: denied beyond the documented lateness: debt bound %s + %d <= burst %d (exact debt %s)", where, vs.FloatString(6), n, c.burst, vf.FloatString(6))
		}
		if !got.Allowed && fOK {
			st.denyFastOK++
		}
		switch {
		case got.Allowed && commit:
			vf, vs = admit(now, vf, vs, n)
		case got.Allowed: // a Peek reports the debt as if debited
			vf = new(big.Rat).Add(vf, nn)
			vs = new(big.Rat).Add(vs, nn)
			// As the cells would hold it (stop 60, audit 103: PeekN says
			// what DecideN would, the take rounded up as admit's set
			// bounds it).
			if slow.infl != nil && vs.Sign() > 0 {
				vs.Mul(vs, slow.infl)
			}
		case commit:
			vf, vs = reject(now, vf, vs)
		}
		check(where, got, n, vf, vs)
		return got
	}

	for step := range steps {
		// Move the clock forward.
		switch x := rng.IntN(16); {
		case x < 9:
			clk.Set(clk.NowMillis() + int64(rng.Float64()*tokMs*1.5))
		case x < 11:
			clk.Set(clk.NowMillis() + int64(rng.IntN(3)))
		case x == 11:
			clk.Set(clk.NowMillis() + int64(rng.Float64()*tokMs*float64(c.burst)))
		case x == 12 && rng.IntN(4) == 0:
			clk.Set(clk.NowMillis() + int64(tokMs*mdF) + 1) // drained
		}
		now := clk.NowMillis()
		var n int
		switch rng.IntN(6) {
		case 0:
			n = c.burst
		case 1:
			n = max(c.burst-rng.IntN(3), 1)
		case 2:
			n = 1 + rng.IntN(c.burst)
		default:
			n = 1 + rng.IntN(min(c.burst, 3))
		}
		op := rng.IntN(10)
		if rng.IntN(30) == 0 {
			n = c.burst + 1 + rng.IntN(3)
			op = rng.IntN(2)
		}
		where := fmt.Sprintf("step %d op %d t %d n %d exact-debt %s bound-debt %s", step, op, now, n, fast.val(now).FloatString(4), slow.val(now).FloatString(4))
		trace = append(trace, where)
		switch op {
		case 0, 1, 2, 3, 4: // DecideN, maybe with the RetryAfter checks
			d := decide(where, now, n, true)
			if d.Allowed || d.Never || rng.IntN(2) == 0 {
				break
			}
			st.retries++
			ra := d.RetryAfter.Milliseconds()
			// 1 ms early: not admitted, except where the doc allows the
			// held read at MaxDebt to be late.
			atMax := slow.val(now).Cmp(pr.md) >= 0 && !exact
			if ra > 1 && !atMax {
				clk.Set(now + ra - 1)
				e := l.PeekN(ms(now+ra-1), key, n)
				if e.Allowed {
					fail("%s: admitted 1 ms before RetryAfter %v", where, d.RetryAfter)
				}
			}
			clk.Set(now + ra)
			trace = append(trace, fmt.Sprintf("  retry at +%d", ra))
			r := decide(where+" (retry at RetryAfter)", now+ra, n, true)
			if !r.Allowed {
				fail("%s: denied at RetryAfter %v: %+v", where, d.RetryAfter, r)
			}
		case 5, 6: // PeekN
			decide(where, now, n, false)
		case 7, 8: // ReserveN: queue toward MaxDebt
			st.reservations++
			vf, vs := fast.val(now), slow.val(now)
			nn := big.NewRat(int64(n), 1)
			r := l.ReserveN(ms(now), key, n)
			fOK := n <= c.burst && new(big.Rat).Add(vf, nn).Cmp(pr.md) <= 0
			sOK := n <= c.burst && new(big.Rat).Add(vs, nn).Cmp(pr.md) <= 0
			if r.OK() && !fOK {
				fail("%s: ReserveN admitted past MaxDebt: exact debt %s + %d > %s", where, vf.FloatString(4), n, pr.md.FloatString(4))
			}
			if exact && r.OK() != fOK {
				fail("%s: ReserveN OK %v, exact bucket %v", where, r.OK(), fOK)
			}
			if !r.OK() && sOK {
				fail("%s: ReserveN refused within the documented bound (bound debt %s + %d <= %s)", where, vs.FloatString(4), n, pr.md.FloatString(4))
			}
			if !r.OK() {
				break
			}
			vf, vs = admit(now, vf, vs, n)
			df := time.Duration(fast.msFor(new(big.Rat).Sub(vf, bR))) * time.Millisecond
			ds := time.Duration(slow.msFor(new(big.Rat).Sub(vs, bR))) * time.Millisecond
			got := r.DelayFrom(ms(now))
			if exact && got != df || got < df || got > ds {
				fail("%s: reservation delay %v, exact %v, bound %v", where, got, df, ds)
			}
		case 9: // Never, or a large n near the burst
			decide(where, now, c.burst+1, rng.IntN(2) == 0)
		}
	}
	return st
}

// audit84unitsMs is a short fraction's config.
func audit84unitsFrac(name string, p, q int64, burst int, maxDebt float64, eng limit.Engine, rc int) audit84unitsCfg {
	return audit84unitsCfg{name: name, lim: limit.Limit(float64(p) / float64(q)), p: p, q: q, burst: burst, maxDebt: maxDebt, eng: eng, rc: rc}
}
