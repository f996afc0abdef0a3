package limit_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// noAmnesty returns, for the count-min, a rotation Period of ten years:
// the tests below hold keys in debt for many Periods of the default
// (16 x MaxDebt's drain time), and a key that never drains to 0 is
// amnestied its old debt once per Period after the first (the package
// documentation, "Rotation and amnesty"), which the exact bucket does
// not model. Other engines take no option.
func noAmnesty(e limit.Engine) limit.Option {
	if e == limit.CountMin {
		return limit.WithPeriod(10 * 365 * 24 * time.Hour)
	}
	return limit.WithSeed(7)
}

// timeBucket is the exact rational token bucket of a key shared by
// several policies, in time form: its debt is in ms of drain (it drains
// 1 ms per ms and never goes below 0), and a request of n tokens under
// a policy of rate r and burst b costs n x 1000/r ms against a cap of
// b x 1000/r ms. With one policy it is the bucket of exact_test.go.
type timeBucket struct {
	debt *big.Rat
	at   int64
}

// policy is a rate's token in ms (1000/r) and a burst.
type policy struct {
	tok   *big.Rat
	burst int
}

func newPolicy(r *big.Rat, burst int) policy {
	return policy{tok: new(big.Rat).Quo(rat(1000), r), burst: burst}
}

func (p policy) ms(n int) *big.Rat { return new(big.Rat).Mul(p.tok, rat(int64(n))) }

func (b *timeBucket) advance(ms int64) {
	if ms > b.at {
		b.debt.Sub(b.debt, rat(ms-b.at))
		if b.debt.Sign() < 0 {
			b.debt.SetInt64(0)
		}
		b.at = ms
	}
}

func (b *timeBucket) fits(p policy, n int) bool {
	return new(big.Rat).Add(b.debt, p.ms(n)).Cmp(p.ms(p.burst)) <= 0
}

func (b *timeBucket) add(p policy, n int) { b.debt.Add(b.debt, p.ms(n)) }

// msUntil returns the least whole ms x with max(debt - x, 0) <= target.
func (b *timeBucket) msUntil(target *big.Rat) int64 {
	ex := new(big.Rat).Sub(b.debt, target)
	if ex.Sign() <= 0 {
		return 0
	}
	q := new(big.Int).Quo(ex.Num(), ex.Denom())
	if !ex.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func (b *timeBucket) retryAfter(p policy, n int) int64 {
	return b.msUntil(new(big.Rat).Sub(p.ms(p.burst), p.ms(n)))
}

func (b *timeBucket) remaining(p policy) int {
	r := new(big.Rat).Sub(p.ms(p.burst), b.debt)
	if r.Sign() <= 0 {
		return 0
	}
	r.Quo(r, p.tok)
	return int(new(big.Int).Quo(r.Num(), r.Denom()).Int64())
}

// checkTime compares d's numbers with the bucket's under p (after the
// decision), as check does for one policy.
func checkTime(rt *rapid.T, d limit.Decision, b *timeBucket, p policy, n int) {
	ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
	switch {
	case d.Never:
		if n <= p.burst || d.RetryAfter != limit.InfDuration {
			rt.Fatalf("Never %+v for n=%d burst %d", d, n, p.burst)
		}
	case !d.Allowed:
		if want := ms(b.retryAfter(p, n)); d.RetryAfter != want {
			rt.Fatalf("RetryAfter %v, exact bucket %v (debt %v ms, n %d, burst %d)", d.RetryAfter, want, b.debt.FloatString(6), n, p.burst)
		}
	case d.RetryAfter != 0:
		rt.Fatalf("admitted with RetryAfter %v", d.RetryAfter)
	}
	if want := ms(b.msUntil(new(big.Rat))); d.ResetAfter != want {
		rt.Fatalf("ResetAfter %v, exact bucket %v", d.ResetAfter, want)
	}
	rem := b.remaining(p)
	if d.Remaining != rem {
		rt.Fatalf("Remaining %d, exact bucket %d (debt %v ms)", d.Remaining, rem, b.debt.FloatString(6))
	}
	var next time.Duration
	if b.debt.Sign() > 0 {
		next = ms(b.retryAfter(p, rem+1))
	}
	if d.NextAfter != next {
		rt.Fatalf("NextAfter %v, exact bucket %v", d.NextAfter, next)
	}
}

// TestExactTiers: on an exact limiter of rate R, every Tier of rate R/k
// (k whole) is exact, and so is every tier that reports Exact, and the
// limiter's own policy after SetLimit(R/k) and SetBurst: every decision,
// RetryAfter, ResetAfter, NextAfter and Remaining of any of them is the
// exact rational bucket's, for keys whose debt several policies share
// (held as time: the bucket is timeBucket), on both engines; a retry at
// RetryAfter is admitted and one 1 ms earlier is not.
func TestExactTiers(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		engine := rapid.SampledFrom([]limit.Engine{limit.Buckets, limit.CountMin}).Draw(rt, "engine")
		var lim limit.Limit
		var r *big.Rat
		var maxDebt int
		if engine == limit.Buckets {
			var maxBurst int
			lim, r, maxBurst = bucketRate(rt)
			maxDebt = rapid.IntRange(1, 2*maxBurst).Draw(rt, "maxDebt")
		} else {
			var burst int
			lim, r, burst = exactRate(rt)
			unit := new(big.Rat).Quo(rat(1000), r).Num().Int64()
			maxDebt = rapid.IntRange(burst, int(min(int64(1<<24)/unit, 4000))).Draw(rt, "maxDebt")
		}
		burst := rapid.IntRange(1, maxDebt).Draw(rt, "burst")
		clk := sketchtest.NewFakeClock()
		clk.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "start"))
		l, err := limit.New(lim, burst, limit.WithClock(clk), limit.WithSeed(rapid.Uint64().Draw(rt, "seed")),
			limit.WithStrict(rapid.Bool().Draw(rt, "strict")), limit.WithEngine(engine), limit.WithMaxDebt(float64(maxDebt)),
			noAmnesty(engine))
		if err != nil {
			rt.Fatal(err)
		}
		if !l.Exact() {
			rt.Fatalf("limit %v burst %d MaxDebt %d not exact", float64(lim), burst, maxDebt)
		}
		// Policy 0 is the limiter's own; then tiers R/k and R x a/b.
		type entry struct {
			tier *limit.Tier
			p    policy
		}
		pols := []entry{{nil, newPolicy(r, burst)}}
		for i := range rapid.IntRange(1, 4).Draw(rt, "tiers") {
			k := rapid.IntRange(1, min(maxDebt, 12)).Draw(rt, "k")
			a, b := 1, k
			if i%2 == 1 {
				a = rapid.IntRange(1, 4).Draw(rt, "a") // a ratio a/b: exact or not
			}
			tb := rapid.IntRange(1, max(maxDebt*a/b, 1)).Draw(rt, "tierBurst")
			tr, err := l.Tier("", lim*limit.Limit(a)/limit.Limit(b), tb)
			if err != nil {
				if a > 1 {
					continue // a faster tier's cost rounded up past MaxDebt
				}
				rt.Fatalf("Tier(R/%d, %d) on MaxDebt %d: %v", k, tb, maxDebt, err)
			}
			if a == 1 && !tr.Exact() {
				rt.Fatalf("Tier(R/%d) not exact", k)
			}
			if tr.Exact() {
				pols = append(pols, entry{tr, newPolicy(new(big.Rat).Mul(r, big.NewRat(int64(a), int64(b))), tb)})
			}
		}
		keys := []string{"a", "b", "c"}
		model := map[string]*timeBucket{}
		for _, k := range keys {
			model[k] = &timeBucket{debt: new(big.Rat), at: clk.NowMillis()}
		}
		tok, _ := new(big.Rat).Quo(rat(1000), r).Float64()
		decide := func(e entry, k string, n int, peek bool) limit.Decision {
			switch {
			case e.tier == nil && peek:
				return l.PeekN(clk.Now(), k, n)
			case e.tier == nil:
				return l.DecideN(clk.Now(), k, n)
			case peek:
				return e.tier.PeekN(clk.Now(), k, n)
			}
			return e.tier.DecideN(clk.Now(), k, n)
		}
		for range rapid.IntRange(1, 150).Draw(rt, "ops") {
			clk.Advance(time.Duration(rapid.Float64Range(0, 3).Draw(rt, "gapTokens")*tok) * time.Millisecond)
			if rapid.IntRange(0, 15).Draw(rt, "set") == 0 {
				// SetLimit(R/k) and SetBurst on the limiter's own policy.
				k := rapid.IntRange(1, min(maxDebt, 12)).Draw(rt, "setK")
				b := rapid.IntRange(1, maxDebt/k).Draw(rt, "setBurst")
				if err := l.SetBurst(1); err != nil {
					rt.Fatal(err)
				}
				if err := l.SetLimit(lim / limit.Limit(k)); err != nil {
					rt.Fatal(err)
				}
				if err := l.SetBurst(b); err != nil {
					rt.Fatal(err)
				}
				if !l.Exact() {
					rt.Fatalf("SetLimit(R/%d) not exact", k)
				}
				pols[0].p = newPolicy(new(big.Rat).Quo(r, rat(int64(k))), b)
			}
			e := pols[rapid.IntRange(0, len(pols)-1).Draw(rt, "policy")]
			k := rapid.SampledFrom(keys).Draw(rt, "key")
			n := rapid.IntRange(1, e.p.burst+1).Draw(rt, "n")
			m := model[k]
			m.advance(clk.NowMillis())
			want := n <= e.p.burst && m.fits(e.p, n)
			d := decide(e, k, n, false)
			if d.Allowed != want {
				rt.Fatalf("%q n=%d at %d: Allowed %v, exact bucket %v (debt %v ms)", k, n, clk.NowMillis(), d.Allowed, want, m.debt.FloatString(6))
			}
			if want {
				m.add(e.p, n)
			}
			checkTime(rt, d, m, e.p, n)
			if d.Allowed || d.Never || !rapid.Bool().Draw(rt, "retry") {
				continue
			}
			at := clk.Now()
			clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
			if decide(e, k, n, true).Allowed {
				rt.Fatalf("admitted 1 ms before RetryAfter %v", d.RetryAfter)
			}
			clk.SetTime(at.Add(d.RetryAfter))
			m.advance(clk.NowMillis())
			if !decide(e, k, n, false).Allowed {
				rt.Fatalf("denied at RetryAfter %v", d.RetryAfter)
			}
			m.add(e.p, n)
		}
	})
}

// TestTierNeverEarly: a tier of any rate r on a limiter of any rate R
// (exact or not) admits a key alone in its cells never before the
// rational bucket (r, b) would, given the admissions so far; RetryAfter
// is never before the bucket's and predicts the tier's own next decision
// to the millisecond; a full burst from an empty key is admitted at once.
func TestTierNeverEarly(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// A float rate and ratio, or a short fraction (mostly on the
		// Buckets engine) and a ratio of small integers: the oracle's
		// rate is then their exact product, which the limiter takes the
		// float for. A float within 4 ulps of a short fraction is that
		// fraction to the limiter (units.go), so the oracle of a float
		// rate is the float 4 ulps up: never early against the fastest
		// rate the float can stand for.
		//
		// The tier's token is at most 20 s, so a run lasts far less than
		// the count-min's stamp sweep (every 2^29 to 2^30 ms; the sweep
		// keeps a linear drain on schedule: TestSweepKeepsLinearDrain,
		// and TestRetryAfterInexact with rates down to 0.001/s).
		engine := limit.CountMin
		rate := rapid.Float64Range(0.5, 5000).Draw(rt, "rate")
		ratio := rapid.Float64Range(0.1, 20).Draw(rt, "ratio")
		tierRate := rate * ratio
		up := tierRate
		for range 4 {
			up = math.Nextafter(up, math.Inf(1))
		}
		exactRate := new(big.Rat).SetFloat64(up)
		if rapid.Bool().Draw(rt, "bucketRate") {
			lim, r, _ := bucketRate(rt)
			a := rapid.Int64Range(1, 40).Draw(rt, "a")
			b := rapid.Int64Range(1, 40).Draw(rt, "b")
			rate, engine = float64(lim), limit.Auto // mostly Buckets
			ratio, tierRate = float64(a)/float64(b), float64(lim*limit.Limit(a)/limit.Limit(b))
			exactRate = new(big.Rat).Mul(r, big.NewRat(a, b))
		}
		burst := rapid.IntRange(1, 200).Draw(rt, "burst")
		tierBurst := rapid.IntRange(1, 200).Draw(rt, "tierBurst")
		maxDebt := max(float64(burst), float64(tierBurst)/ratio*1.01) * rapid.Float64Range(1, 4).Draw(rt, "debtFactor")
		clk := sketchtest.NewFakeClock()
		clk.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "start"))
		l, err := limit.New(limit.Limit(rate), burst, limit.WithClock(clk), limit.WithSeed(7), limit.WithEngine(engine),
			limit.WithMaxDebt(math.Min(maxDebt, 1<<24)), noAmnesty(engine))
		if err != nil {
			rt.Skip(err) // MaxDebt beyond the count-min's float32 span at a slow rate
		}
		tr, err := l.Tier("t", limit.Limit(tierRate), tierBurst)
		if err != nil {
			rt.Fatalf("Tier(%v, %d) on %v/%d MaxDebt %v: %v", tierRate, tierBurst, rate, burst, l.MaxDebt(), err)
		}
		for i := range tierBurst {
			if !tr.Allow("empty") {
				rt.Fatalf("request %d of the tier's burst %d denied", i+1, tierBurst)
			}
		}
		if tr.Allow("empty") {
			rt.Fatal("request past the tier's burst admitted")
		}
		neverEarly(rt, tr, clk, exactRate, tierBurst)
	})
}

// TestExactTierCases: deterministic tiers on both engines against the
// exact bucket: drain a tier's burst, then knock at every RetryAfter and
// at odd gaps, for hundreds of tokens.
func TestExactTierCases(t *testing.T) {
	for _, c := range []struct {
		lim, tier limit.Limit
		r         *big.Rat
		burst     int
		maxDebt   float64
	}{
		{10, 2.5, big.NewRat(5, 2), 10, 40},
		{10, limit.Limit(10) / 3, big.NewRat(10, 3), 7, 30},
		{limit.Every(time.Hour / 1000), limit.Every(time.Hour / 250), big.NewRat(250, 3600), 4, 16},
		{3, 1, big.NewRat(1, 1), 5, 15},
		{100, 20, big.NewRat(20, 1), 40, 200},
		{limit.Every(7 * time.Millisecond), limit.Every(21 * time.Millisecond), big.NewRat(1000, 21), 100, 300},
	} {
		for _, engine := range []limit.Engine{limit.Buckets, limit.CountMin} {
			clk := sketchtest.NewFakeClock()
			l, err := limit.New(c.lim, 1, limit.WithClock(clk), limit.WithSeed(3), limit.WithEngine(engine), limit.WithMaxDebt(c.maxDebt),
				noAmnesty(engine))
			if err != nil {
				t.Fatalf("%v %v: %v", float64(c.lim), engine, err)
			}
			tr, err := l.Tier("", c.tier, c.burst)
			if err != nil || !tr.Exact() {
				t.Fatalf("%v %v tier %v: %v, exact %v", float64(c.lim), engine, float64(c.tier), err, tr != nil && tr.Exact())
			}
			m := newBucket(c.r, c.burst)
			for i := range 400 {
				m.advance(clk.NowMillis())
				n := 1 + i%3%c.burst
				d := tr.DecideN(clk.Now(), "k", n)
				if d.Allowed != m.fits(n) {
					t.Fatalf("%v %v step %d: Allowed %v, exact %v", float64(c.tier), engine, i, d.Allowed, m.fits(n))
				}
				if d.Allowed {
					m.debt.Add(m.debt, rat(int64(n)))
					continue
				}
				if want := time.Duration(m.retryAfter(n)) * time.Millisecond; d.RetryAfter != want {
					t.Fatalf("%v %v step %d: RetryAfter %v, exact %v", float64(c.tier), engine, i, d.RetryAfter, want)
				}
				if i%2 == 0 {
					clk.Advance(d.RetryAfter)
				} else {
					clk.Advance(d.RetryAfter / 3)
				}
			}
		}
	}
}
