package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a116Rat is f as the package reads a rate: its short fraction where it
// has one (1000/7 for Every(7ms), 1/3 for Every(3s)), else its own value.
func a116Rat(f float64) *big.Rat {
	for den := int64(1); den <= 1<<17; den++ {
		x := f * float64(den)
		if x >= 1<<52 {
			break
		}
		r := new(big.Rat).SetFrac64(int64(math.Round(x)), den)
		if g, _ := r.Float64(); g == f {
			return r
		}
	}
	return new(big.Rat).SetFloat64(f)
}

// a116Bucket is the rational token bucket of the package documentation
// in debt form, with every policy's debt held as time to drain (ms, a
// big.Rat): a request of n tokens under rate r costs 1000n/r ms against
// a burst of 1000b/r ms, a denial adds RejectCost x 1000/r ms, debts are
// clamped at MaxDebt/R s and drain 1 ms a ms. hw is the limiter's
// latest time used (every t counts as max(hw, min(t, clock))).
type a116Bucket struct {
	d   *big.Rat // ms of debt at hw
	hw  int64
	max *big.Rat // ms
}

type a116Pol struct {
	r  *big.Rat // tokens per second
	b  int
	lf limit.Limit
}

func (p a116Pol) costMs(n int) *big.Rat {
	return new(big.Rat).Quo(big.NewRat(1000*int64(n), 1), p.r)
}

func a116Ceil(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom()) // truncates toward 0
	if x.Sign() > 0 && !x.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func a116Floor(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom())
	if x.Sign() < 0 && !x.IsInt() {
		q.Sub(q, big.NewInt(1))
	}
	return q.Int64()
}

// at moves the bucket to the time a call at t with the clock at clk
// decides at, and returns the gap (ms) its durations carry.
func (o *a116Bucket) at(t, clk int64) int64 {
	from := min(t, clk)
	if from > o.hw {
		o.d.Sub(o.d, big.NewRat(from-o.hw, 1))
		if o.d.Sign() < 0 {
			o.d.SetInt64(0)
		}
		o.hw = from
	}
	return o.hw - from
}

func a116Dur(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// fill is the Decision's Remaining, ResetAfter and NextAfter for debt d.
func (p a116Pol) fill(d *big.Rat, gap int64, dec *limit.Decision) {
	// Remaining: floor(b - d r / 1000), at least 0.
	x := new(big.Rat).Mul(d, p.r)
	x.Quo(x, big.NewRat(1000, 1))
	x.Sub(big.NewRat(int64(p.b), 1), x)
	dec.Remaining = int(max(a116Floor(x), 0))
	if d.Sign() > 0 {
		dec.ResetAfter = a116Dur(gap + a116Ceil(d))
		if dec.Remaining < p.b {
			// least x: d - x <= B - cost(Remaining+1)
			y := new(big.Rat).Sub(d, p.costMs(p.b))
			y.Add(y, p.costMs(dec.Remaining+1))
			dec.NextAfter = a116Dur(gap + max(a116Ceil(y), 0))
		}
	}
}

// decide is DecideN (commit) or PeekN on the bucket.
func (o *a116Bucket) decide(p a116Pol, rej *big.Rat, t, clk int64, n int, commit bool) limit.Decision {
	gap := o.at(t, clk)
	dec := limit.Decision{Limit: p.lf, Burst: p.b}
	d := new(big.Rat).Set(o.d)
	c := p.costMs(n)
	reject := func() {
		if commit && rej.Sign() > 0 {
			d.Add(d, new(big.Rat).Mul(rej, p.costMs(1)))
			if d.Cmp(o.max) > 0 {
				d.Set(o.max)
			}
		}
	}
	switch {
	case n > p.b:
		dec.Never, dec.RetryAfter = true, limit.InfDuration
		reject()
	case new(big.Rat).Add(d, c).Cmp(p.costMs(p.b)) <= 0:
		dec.Allowed = true
		d.Add(d, c)
	default:
		reject()
		x := new(big.Rat).Add(d, c)
		x.Sub(x, p.costMs(p.b))
		dec.RetryAfter = a116Dur(gap + max(a116Ceil(x), 1))
	}
	p.fill(d, gap, &dec)
	if commit {
		o.d = d
	}
	return dec
}

type a116Cfg struct {
	name    string
	rate    limit.Limit
	burst   int
	maxDebt float64
	rej     float64
	strict  bool
}

// TestAudit116OracleDecisionFields drives one key of limiters on every
// engine (Auto, Buckets, CountMin where New takes it) through random
// schedules of the whole decision API against the rational bucket
// (a116Bucket), where Exact() reports true: clocks stepping back, stale
// and future t, years of idle, n from 1 to burst+1, fractional rates
// (Every(7ms), 1e-3/s), 1e6/s, bursts of 1 and of millions, RejectCost,
// SetLimit/SetBurst mid-stream (the debt carried as time), exact Tiers,
// ReserveN (Delay) and Cancel right after (the key as if never taken).
// The package doc: "For a key alone in its cells, the limiter is the
// exact token bucket at millisecond resolution: every decision, and
// every RetryAfter, ResetAfter, NextAfter and Remaining, is that of the
// rational bucket ..., when Exact reports true."
func TestAudit116OracleDecisionFields(t *testing.T) {
	cfgs := []a116Cfg{
		{"every7ms/1", limit.Every(7 * time.Millisecond), 1, 0, 0, true},
		{"every7ms/5", limit.Every(7 * time.Millisecond), 5, 0, 1, true},
		{"every7ms/100", limit.Every(7 * time.Millisecond), 100, 400, 0, true},
		{"1e-3/1", 1e-3, 1, 0, 0, true},
		{"1e-3/3", 1e-3, 3, 12, 0.5, true},
		{"1e6/1", 1e6, 1, 0, 0, true},
		{"1e6/1000", 1e6, 1000, 4000, 1, true},
		{"1e6/2^23", 1e6, 1 << 23, 1 << 24, 0, true},
		{"10/20", 10, 20, 0, 0, true},
		{"10/20/rej", 10, 20, 80, 0.5, true},
		{"10/20/opt", 10, 20, 80, 0, false},
		{"every3s/2", limit.Every(3 * time.Second), 2, 8, 0, true},
		{"0.3/5", 0.3, 5, 0, 0, true},
		{"1000/1", 1000, 1, 4, 0, true},
		{"every24h/3", limit.Every(24 * time.Hour), 3, 0, 0, true},
		{"1e6/2^24", 1e6, 1 << 24, 1 << 24, 0, true},
		{"1e3/2^24", 1e3, 1 << 24, 1 << 24, 1, true},
		{"1e6/1/md1", 1e6, 1, 1, 0, true},
		{"every7ms/1/md1", limit.Every(7 * time.Millisecond), 1, 1, 0, true},
		{"1e-3/1/md1", 1e-3, 1, 1, 0, true},
	}
	engines := []limit.Engine{limit.Auto, limit.Buckets, limit.CountMin}
	seeds := testsize.Sample(6, 2, 1)
	steps := testsize.Sample(400, 200, 100)
	for _, c := range cfgs {
		for _, eng := range engines {
			for seed := range seeds {
				a116Run(t, c, eng, uint64(seed), steps)
			}
		}
	}
}

func a116Run(t *testing.T, c a116Cfg, eng limit.Engine, seed uint64, steps int) {
	t.Helper()
	clk := limittest.NewFakeClock()
	const start = int64(1) << 40
	clk.Set(start)
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(eng),
		limit.WithCapacity(64, 0.01), limit.WithRejectCost(c.rej), limit.WithStrict(c.strict)}
	if c.maxDebt > 0 {
		opts = append(opts, limit.WithMaxDebt(c.maxDebt))
	}
	l, err := limit.New(c.rate, c.burst, opts...)
	if err != nil {
		if seed == 0 {
			t.Logf("%s on %v: %v", c.name, eng, err)
		}
		return
	}
	if !l.Exact() {
		if seed == 0 {
			t.Logf("%s on %v (%v): not Exact, skipped", c.name, eng, l.Engine())
		}
		return
	}
	R := a116Rat(float64(c.rate))
	pol := a116Pol{r: R, b: c.burst, lf: c.rate}
	o := &a116Bucket{d: new(big.Rat), hw: start,
		max: new(big.Rat).Quo(new(big.Rat).Mul(a116Rat(l.MaxDebt()), big.NewRat(1000, 1)), R)}
	rej := a116Rat(c.rej)
	// Exact tiers: R/k and k R for small k, where they hold.
	type tier struct {
		t *limit.Tier
		p a116Pol
	}
	var tiers []tier
	for _, f := range []*big.Rat{big.NewRat(1, 2), big.NewRat(1, 4), big.NewRat(2, 1), big.NewRat(1, 1), big.NewRat(3, 1)} {
		r := new(big.Rat).Mul(R, f)
		rf, _ := r.Float64()
		for _, b := range []int{1, c.burst} {
			tr, err := l.Tier("t", limit.Limit(rf), b)
			if err != nil || !tr.Exact() {
				continue
			}
			tiers = append(tiers, tier{tr, a116Pol{r: a116Rat(rf), b: b, lf: limit.Limit(rf)}})
		}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(c.name))*7919+uint64(eng)))
	drainMs := a116Ceil(pol.costMs(c.burst))
	var hist []string
	fail := func(format string, args ...any) {
		t.Helper()
		h := hist
		if len(h) > 30 {
			h = h[len(h)-30:]
		}
		t.Fatalf("%s on %v (engine %v) seed %d: %s\nlast steps:\n%s", c.name, eng, l.Engine(), seed,
			fmt.Sprintf(format, args...), strings.Join(h, "\n"))
	}
	pickN := func(p a116Pol) int {
		switch rng.IntN(6) {
		case 0:
			return p.b
		case 1:
			return p.b + 1
		case 2:
			return 1 + rng.IntN(p.b)
		}
		return 1
	}
	pickT := func() (time.Time, int64) {
		now := clk.NowMillis()
		var ms int64
		switch rng.IntN(5) {
		case 0:
			ms = now - rng.Int64N(2000) // stale, maybe before hw
		case 1:
			ms = now + rng.Int64N(5000) // future: counts as the clock's reading
		default:
			ms = now
		}
		return time.UnixMilli(ms), ms
	}
	check := func(what string, got, want limit.Decision) {
		t.Helper()
		got.Policy = ""
		if got != want {
			fail("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	for step := range steps {
		switch k := rng.IntN(20); {
		case k < 4: // time passes
			var d int64
			switch rng.IntN(8) {
			case 0:
				d = rng.Int64N(max(2*drainMs, 2))
			case 1:
				d = drainMs
			case 2:
				if rng.IntN(8) == 0 {
					d = 3 * 365 * 24 * 3600 * 1000 // three years idle
				} else {
					d = rng.Int64N(20)
				}
			default:
				d = rng.Int64N(8)
			}
			clk.Advance(a116Dur(d))
			hist = append(hist, fmt.Sprintf("advance %dms -> clock %d (hw %d)", d, clk.NowMillis()-start, o.hw-start))
		case k == 4: // the clock steps back
			d := rng.Int64N(3000)
			clk.Advance(-a116Dur(d))
			hist = append(hist, fmt.Sprintf("back %dms -> clock %d (hw %d)", d, clk.NowMillis()-start, o.hw-start))
		case k < 8: // DecideN / PeekN
			tm, ms := pickT()
			n := pickN(pol)
			commit := rng.IntN(3) > 0
			want := o.decide(pol, rej, ms, clk.NowMillis(), n, commit)
			var got limit.Decision
			if commit {
				got = l.DecideN(tm, "k", n)
			} else {
				got = l.PeekN(tm, "k", n)
			}
			hist = append(hist, fmt.Sprintf("step %d: %s(t=%d, n=%d) = %+v", step, map[bool]string{true: "DecideN", false: "PeekN"}[commit], ms-start, n, got))
			check("DecideN/PeekN", got, want)
		case k < 10: // AllowN / Allow / Decide / Peek
			n := 1
			var ms int64
			var tm time.Time
			short := rng.IntN(2) == 0
			if short {
				ms = clk.NowMillis()
			} else {
				tm, ms = pickT()
				n = pickN(pol)
			}
			var want limit.Decision
			if n <= pol.b || rej.Sign() > 0 {
				want = o.decide(pol, rej, ms, clk.NowMillis(), n, true)
			} // else AllowN denies without reading the key (no time used)
			var got bool
			if short {
				switch rng.IntN(3) {
				case 0:
					got = l.Allow("k")
				case 1:
					d := l.Decide("k")
					got = d.Allowed
					check("Decide", d, want)
				case 2:
					got = l.AllowN(clk.Now(), "k", 1) // the strict Charge path's twin
				}
				hist = append(hist, fmt.Sprintf("step %d: Allow(clock %d) = %v", step, ms-start, got))
			} else {
				got = l.AllowN(tm, "k", n)
				hist = append(hist, fmt.Sprintf("step %d: AllowN(t=%d, n=%d) = %v", step, ms-start, n, got))
			}
			if got != want.Allowed {
				fail("Allow/AllowN: got %v, want %v (%+v)", got, want.Allowed, want)
			}
		case k < 12: // TokensAt
			tm, ms := pickT()
			o.at(ms, clk.NowMillis())
			got := l.TokensAt(tm, "k")
			x := new(big.Rat).Mul(o.d, pol.r)
			x.Quo(x, big.NewRat(1000, 1))
			x.Sub(big.NewRat(int64(pol.b), 1), x)
			want, _ := x.Float64()
			hist = append(hist, fmt.Sprintf("step %d: TokensAt(t=%d) = %v", step, ms-start, got))
			if math.Abs(got-want) > 1e-9*float64(pol.b) || (o.d.Sign() > 0 && got >= float64(pol.b)) {
				fail("TokensAt: got %v, want %v", got, want)
			}
		case k < 15: // ReserveN, then maybe Cancel
			tm, ms := pickT()
			n := pickN(pol)
			if n <= pol.b { // n > burst returns before reading the key: no time used
				o.at(ms, clk.NowMillis())
			}
			before, beforeAt := new(big.Rat).Set(o.d), o.hw
			c := pol.costMs(n)
			after := new(big.Rat).Add(o.d, c)
			wantOK := n <= pol.b && after.Cmp(o.max) <= 0
			r := l.ReserveN(tm, "k", n)
			hist = append(hist, fmt.Sprintf("step %d: ReserveN(t=%d, n=%d) ok=%v", step, ms-start, n, r.OK()))
			if r.OK() != wantOK {
				fail("ReserveN(n=%d): OK %v, want %v (debt %v ms, max %v ms)", n, r.OK(), wantOK, o.d.FloatString(3), o.max.FloatString(3))
			}
			if !wantOK {
				if r.Delay() != limit.InfDuration { // not OK: Delay reads no clock
					fail("ReserveN not OK: Delay %v", r.Delay())
				}
				continue
			}
			o.d = new(big.Rat).Set(after)
			x := new(big.Rat).Sub(after, pol.costMs(pol.b))
			act := o.hw + max(a116Ceil(x), 0)
			wantDelay := a116Dur(max(act-clk.NowMillis(), 0))
			o.at(clk.NowMillis(), clk.NowMillis()) // Delay reads Now: the clock's reading is used
			if got := r.Delay(); got != wantDelay {
				fail("ReserveN(n=%d) Delay %v, want %v (act at %d, clock %d)", n, got, wantDelay, act-start, clk.NowMillis()-start)
			}
			if rng.IntN(2) == 0 && after.Cmp(o.max) < 0 {
				if rng.IntN(2) == 0 {
					d := rng.Int64N(50)
					clk.Advance(a116Dur(d))
					hist = append(hist, fmt.Sprintf("advance %dms", d))
				}
				r.Cancel()
				// The key reads as if never taken, drained since.
				o.d = before.Sub(before, big.NewRat(o.hw-beforeAt, 1))
				if o.d.Sign() < 0 {
					o.d.SetInt64(0)
				}
				hist = append(hist, "Cancel")
			}
		case k < 16: // WaitN on the fake clock
			n := pickN(pol)
			if n > pol.b {
				n = pol.b
			}
			now := clk.NowMillis()
			saved, savedAt := new(big.Rat).Set(o.d), o.hw
			o.at(now, now)
			after := new(big.Rat).Add(o.d, pol.costMs(n))
			if after.Cmp(o.max) > 0 {
				o.d, o.hw = saved, savedAt // no call made
				continue
			}
			x := new(big.Rat).Sub(after, pol.costMs(pol.b))
			act := o.hw + max(a116Ceil(x), 0)
			wait := act - now
			done := make(chan error, 1)
			go func() { done <- l.WaitN(t.Context(), "k", n) }()
			if wait > 0 {
				clk.BlockUntilTimers(1)
				if wait > 1 {
					clk.Advance(a116Dur(wait - 1))
				}
				select {
				case err := <-done:
					fail("WaitN(n=%d) returned %v %dms early (wait %dms)", n, err, 1, wait)
				default:
				}
				clk.Advance(time.Millisecond)
			}
			select {
			case err := <-done:
				if err != nil {
					fail("WaitN(n=%d): %v", n, err)
				}
			case <-time.After(30 * time.Second):
				fail("WaitN(n=%d) still waiting at the oracle's act time (wait %dms)", n, wait)
			}
			o.d = new(big.Rat).Set(after)
			hist = append(hist, fmt.Sprintf("step %d: WaitN(n=%d) waited %dms", step, n, wait))
		case k < 18: // SetLimit / SetBurst
			if rng.IntN(2) == 0 {
				f := []*big.Rat{big.NewRat(1, 2), big.NewRat(2, 1), big.NewRat(1, 1), big.NewRat(1, 3), big.NewRat(4, 1)}[rng.IntN(5)]
				r := new(big.Rat).Mul(R, f)
				rf, _ := r.Float64()
				old := pol.lf
				if err := l.SetLimit(limit.Limit(rf)); err != nil {
					continue
				}
				if !l.Exact() {
					if err := l.SetLimit(old); err != nil {
						fail("SetLimit back to %v: %v", old, err)
					}
					continue
				}
				pol = a116Pol{r: a116Rat(rf), b: pol.b, lf: limit.Limit(rf)}
				hist = append(hist, fmt.Sprintf("SetLimit(%v)", rf))
			} else {
				b := []int{1, 2, c.burst, max(c.burst/2, 1), c.burst + 1}[rng.IntN(5)]
				if err := l.SetBurst(b); err != nil {
					continue
				}
				if !l.Exact() {
					fail("SetBurst(%d) made the limiter inexact", b)
				}
				pol.b = b
				hist = append(hist, fmt.Sprintf("SetBurst(%d)", b))
			}
			if l.Limit() != pol.lf || l.Burst() != pol.b {
				fail("Limit/Burst %v/%d, want %v/%d", l.Limit(), l.Burst(), pol.lf, pol.b)
			}
		default: // a Tier's decision
			if len(tiers) == 0 {
				continue
			}
			tr := tiers[rng.IntN(len(tiers))]
			tm, ms := pickT()
			n := pickN(tr.p)
			if rng.IntN(3) == 0 {
				ms = clk.NowMillis()
				want := o.decide(tr.p, rej, ms, ms, 1, true)
				got := tr.t.Allow("k")
				hist = append(hist, fmt.Sprintf("step %d: Tier(%v,%d).Allow = %v", step, tr.p.lf, tr.p.b, got))
				if got != want.Allowed {
					fail("Tier(%v, %d).Allow: got %v, want %+v", tr.p.lf, tr.p.b, got, want)
				}
				continue
			}
			want := o.decide(tr.p, rej, ms, clk.NowMillis(), n, true)
			got := tr.t.DecideN(tm, "k", n)
			hist = append(hist, fmt.Sprintf("step %d: Tier(%v,%d).DecideN(t=%d, n=%d) = %+v", step, tr.p.lf, tr.p.b, ms-start, n, got))
			check("Tier.DecideN", got, want)
		}
	}
}
