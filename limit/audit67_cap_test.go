package limit_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a67CapCases: inexact rates with MaxDebt > 65536 tokens, on the
// count-min (Auto picks it), where no float32 holds MaxDebt in units.
var a67CapCases = []struct {
	r limit.Limit
	b int
}{
	{0.9444444444444444, 958687},
	{3.4977583072838137, 535500},
	{0.0005581315387422752, 1040836},
}

// a67Lim builds a limiter at t0 = 1,000,000 ms with MaxDebt = burst.
func a67Lim(t *testing.T, r limit.Limit, b int, opts ...limit.Option) (*limit.Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l, err := limit.New(r, b, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(b))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.CountMin {
		t.Fatalf("New(%v, %d) runs on %v", float64(r), b, l.Engine())
	}
	return l, clk
}

// a67Gap is how long (ms, at least) the cell's float32 clamp above
// MaxDebt takes to drain to MaxDebt: found as the first delta after a
// full burst at which the limiter's TokensAt leaves -0 / moves.
func a67ms(d time.Duration) int64 { return int64(math.Ceil(float64(d) / float64(time.Millisecond))) }

// TestAudit67CapNeverEarly: a key filled to MaxDebt (a full burst, a
// RejectCost penalty, a reservation up to the cap), read at delays 0..
// past the clamp's drain: a retry at t+RetryAfter is admitted, the key is
// full at t+ResetAfter, has a whole token at t+NextAfter, and a
// reservation's time to act leaves tokens >= 0 (never early); each is
// within the clamp's step (MaxDebt x 2^-23 / rate) + 2 ms of the exact
// bucket's (debt exactly MaxDebt, drained since the fill).
func TestAudit67CapNeverEarly(t *testing.T) {
	testsize.Serial(t)
	for _, c := range a67CapCases {
		step := float64(c.b) * 0x1p-23 / float64(c.r) * 1000 // ms, the clamp's drain at most
		for _, how := range []string{"burst", "reject", "reserve"} {
			for _, delta := range []int64{0, 1, 3, int64(step / 2), int64(step), int64(step) + 5, int64(3 * step)} {
				opts := []limit.Option{}
				if how == "reject" {
					opts = append(opts, limit.WithRejectCost(float64(c.b)))
				}
				l, clk := a67Lim(t, c.r, c.b, opts...)
				t0 := l.Now()
				switch how {
				case "burst":
					if !l.AllowN(t0, "k", c.b) {
						t.Fatal("full burst denied")
					}
				case "reject":
					l.AllowN(t0, "k", c.b/2+1)
					l.DecideN(t0, "k", c.b) // denied: the penalty fills to MaxDebt
				case "reserve":
					if r := l.ReserveN(t0, "k", c.b); !r.OK() {
						t.Fatal("reservation of a full burst refused")
					}
				}
				clk.Set(1_000_000 + delta)
				at := l.Now()
				d := l.PeekN(at, "k", 1)
				if d.Allowed {
					t.Fatalf("%v %s +%d: admitted at the cap", float64(c.r), how, delta)
				}
				// exact bucket: debt MaxDebt at t0, drained since
				dr := float64(c.r) / 1000 // tokens per ms
				exactRetry := (float64(c.b)-float64(c.b-1))/dr - float64(delta)
				exactReset := float64(c.b)/dr - float64(delta)
				ra, rs, na := a67ms(d.RetryAfter), a67ms(d.ResetAfter), a67ms(d.NextAfter)
				for _, x := range []struct {
					name  string
					got   int64
					exact float64
					ok    func() bool
				}{
					{"RetryAfter", ra, exactRetry, func() bool { clk.Set(at.UnixMilli() + ra); return l.PeekN(l.Now(), "k", 1).Allowed }},
					{"ResetAfter", rs, exactReset, func() bool { clk.Set(at.UnixMilli() + rs); return l.TokensAt(l.Now(), "k") >= float64(c.b) }},
					{"NextAfter", na, exactRetry, func() bool { clk.Set(at.UnixMilli() + na); return l.TokensAt(l.Now(), "k") >= 1 }},
				} {
					if !x.ok() {
						t.Errorf("%v x %d %s +%d ms: %s %d ms is early", float64(c.r), c.b, how, delta, x.name, x.got)
					}
					if late := float64(x.got) - x.exact; late > step+x.exact*0x1p-7+2 || late < -1 {
						t.Errorf("%v x %d %s +%d ms: %s %d ms, exact %.1f ms: late %.1f ms, bound %.1f", float64(c.r), c.b, how, delta, x.name, x.got, x.exact, late, step+2)
					}
				}
			}
		}
	}
}

// TestAudit67FixedRetryAfterLateInsideClampStep (fixed in the docs,
// stop 47: limit/doc.go and Decision.RetryAfter name the exception: a key
// read at such a MaxDebt may be late by up to the float32 step's drain,
// never early; checked here: the retry at t+RetryAfter is admitted, and
// no retry more than the step (plus 1 ms) before it). limit/doc.go,
// "Exactness": "Either way a full burst is admitted at once from an empty
// key, and RetryAfter predicts the limiter's own next decision to the
// millisecond: a retry at t+RetryAfter is admitted and one 1 ms earlier
// is not." On the count-min at MaxDebt (no float32 holds MaxDebt in
// units), held (limit/engine.go) reads every debt read capped at MaxDebt
// as the float32 clamp above it, however long the cell has drained since
// it was filled: read delta ms after the fill (delta inside the clamp's
// step), RetryAfter is late by about delta, and a retry 1 ms before
// t+RetryAfter (and up to delta ms before) is admitted.
func TestAudit67FixedRetryAfterLateInsideClampStep(t *testing.T) {
	for _, c := range a67CapCases {
		step := float64(c.b) * 0x1p-23 / float64(c.r) * 1000
		l, clk := a67Lim(t, c.r, c.b)
		t0 := l.Now()
		if !l.AllowN(t0, "k", c.b) {
			t.Fatal("full burst denied")
		}
		d0 := l.PeekN(t0, "k", 1)
		delta := int64(step / 3)
		clk.Set(1_000_000 + delta)
		at := l.Now()
		d := l.PeekN(at, "k", 1)
		ra := a67ms(d.RetryAfter)
		// a fresh twin per probe: the limiter's time only moves forward
		probe := func(ms int64) bool {
			l2, clk2 := a67Lim(t, c.r, c.b)
			l2.AllowN(t0, "k", c.b)
			clk2.Set(at.UnixMilli() + ms)
			return l2.PeekN(l2.Now(), "k", 1).Allowed
		}
		early := struct{ Allowed bool }{probe(ra - 1)}
		lo, hi := int64(0), ra
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if probe(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		if !probe(ra) {
			t.Errorf("New(%v, %d): at t0+%d ms RetryAfter %v is early", float64(c.r), c.b, delta, d.RetryAfter)
		}
		if early.Allowed && float64(ra-hi) > step+1 {
			t.Errorf("New(%v, %d, WithMaxDebt(%d)) on %v: a full burst at t0; at t0+%d ms RetryAfter is %v (at t0 it was %v), "+
				"but a retry 1 ms before t+RetryAfter is admitted; the first admitted retry is %d ms after t, RetryAfter late by %d ms "+
				"beyond the float32 step's drain, %.1f ms (limit/doc.go)",
				float64(c.r), c.b, c.b, l.Engine(), delta, d.RetryAfter, d0.RetryAfter, hi, ra-hi, step)
		}
	}
}

type a67Dec interface {
	PeekN(t time.Time, key string, n int) limit.Decision
	TokensAt(t time.Time, key string) float64
	Burst() int
	Limit() limit.Limit
	MaxDebt() float64
}

// TestAudit67CapNeverEarlyAfterPolicyChanges: the same checks at the cap
// (delta 0: the read right after the fill) after SetLimit before and
// after the fill, SetBurst after it, and through a Tier filled by its
// RejectCost penalty: a retry at t+RetryAfter is admitted, the key is
// full at t+ResetAfter and has a token at t+NextAfter (never early), and
// each is within 2^-7 of MaxDebt's time (the units' rounding) plus the
// clamp's step plus 2 ms of the exact bucket's from MaxDebt, kept as time
// ("A key in debt keeps its debt as time"), under the policy in force;
// early against it only by the rounded cost of the new policy's burst ("a
// key shared with it counts its burst at the rounded cost (at most b grid
// steps of drain more time than b x R/r)"), at most 2^-7 of the burst's time.
func TestAudit67CapNeverEarlyAfterPolicyChanges(t *testing.T) {
	testsize.Serial(t)
	type scen struct {
		name string
		run  func(l *limit.Limiter, t0 time.Time) a67Dec
	}
	for _, c := range a67CapCases {
		scens := []scen{
			{"SetLimit*2 then fill", func(l *limit.Limiter, t0 time.Time) a67Dec {
				if err := l.SetLimit(c.r * 2); err != nil {
					t.Fatal(err)
				}
				l.AllowN(t0, "k", c.b)
				l.DecideN(t0, "k", 1) // denied: the penalty (b of New's tokens) fills to MaxDebt
				return l
			}},
			{"fill then SetLimit*1.7", func(l *limit.Limiter, t0 time.Time) a67Dec {
				l.AllowN(t0, "k", c.b)
				if err := l.SetLimit(c.r * 1.7); err != nil {
					t.Fatal(err)
				}
				return l
			}},
			{"fill then SetBurst/2", func(l *limit.Limiter, t0 time.Time) a67Dec {
				l.AllowN(t0, "k", c.b)
				if err := l.SetBurst(c.b / 2); err != nil {
					t.Fatal(err)
				}
				return l
			}},
			{"tier reject", func(l *limit.Limiter, t0 time.Time) a67Dec {
				tr, err := l.Tier("t", c.r*0.5, c.b/3)
				if err != nil {
					t.Fatal(err)
				}
				tr.AllowN(t0, "k", c.b/3)
				tr.DecideN(t0, "k", 1) // denied: the penalty fills to MaxDebt
				return tr
			}},
		}
		for _, sc := range scens {
			build := func() (a67Dec, *sketchtest.FakeClock, time.Time) {
				l, clk := a67Lim(t, c.r, c.b, limit.WithRejectCost(float64(c.b)))
				t0 := l.Now()
				return sc.run(l, t0), clk, t0
			}
			d0, _, t0 := build()
			d := d0.PeekN(t0, "k", 1)
			if d.Allowed {
				t.Fatalf("%v %s: admitted at the cap", float64(c.r), sc.name)
			}
			rate := float64(d0.Limit()) / 1000
			D := float64(c.b) / float64(c.r) * 1000 // MaxDebt as time (ms): a debt is kept as time
			step := float64(c.b) * 0x1p-23 / float64(c.r) * 1000
			b := float64(d0.Burst())
			for _, x := range []struct {
				name  string
				dur   time.Duration
				exact float64
				ok    func(a67Dec, time.Time) bool
			}{
				{"RetryAfter", d.RetryAfter, D - (b-1)/rate, func(l a67Dec, at time.Time) bool { return l.PeekN(at, "k", 1).Allowed }},
				{"ResetAfter", d.ResetAfter, D, func(l a67Dec, at time.Time) bool { return l.TokensAt(at, "k") >= b }},
				{"NextAfter", d.NextAfter, D - (b-1)/rate, func(l a67Dec, at time.Time) bool { return l.TokensAt(at, "k") >= 1 }},
			} {
				ms := a67ms(x.dur)
				l2, clk2, _ := build()
				clk2.Set(t0.UnixMilli() + ms)
				if !x.ok(l2, time.UnixMilli(t0.UnixMilli()+ms)) {
					t.Errorf("%v x %d %s: %s %v is early", float64(c.r), c.b, sc.name, x.name, x.dur)
				}
				if late := float64(ms) - x.exact; late > step+D*0x1p-7+2 || late < -1-b/rate*0x1p-7 {
					t.Errorf("%v x %d %s: %s %d ms, exact %.1f ms: late %.1f ms (bound %.1f)", float64(c.r), c.b, sc.name, x.name, ms, x.exact, late, step+D*0x1p-7+2)
				}
			}
		}
	}
}

// TestAudit67CapRandomRates: random rates (short fractions and not) and
// MaxDebt = burst from 65,537 to 2^24 tokens on the count-min, a full
// burst from an empty key: at the cap the denial's RetryAfter is
// admitted at t+RetryAfter (a twin replaying the schedule), the key is
// full at t+ResetAfter, and each is late against the exact bucket by at
// most the units' rounding (2^-7 of MaxDebt's time) plus the clamp's step
// (MaxDebt x 2^-23 of it) plus 2 ms. The worst lateness beyond the
// rounding is logged.
func TestAudit67CapRandomRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(67, 7))
	worst := 0.0
	for i := 0; i < 150; i++ {
		var r float64
		if rng.IntN(2) == 0 {
			r = float64(1+rng.IntN(97)) / float64(1+rng.IntN(89))
		} else {
			r = math.Exp(rng.Float64()*14 - 9)
		}
		b := 65537 + rng.IntN(1<<24-65537)
		mk := func() (*limit.Limiter, *sketchtest.FakeClock) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l, err := limit.New(limit.Limit(r), b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(b)), limit.WithEngine(limit.CountMin), limit.WithSize(2, 64))
			if err != nil {
				t.Fatalf("New(%v, %d): %v", r, b, err)
			}
			if !l.AllowN(l.Now(), "k", b) {
				t.Fatalf("New(%v, %d): full burst denied", r, b)
			}
			return l, clk
		}
		l, _ := mk()
		d := l.PeekN(l.Now(), "k", 1)
		D := float64(b) / r * 1000
		if D > 9e12 {
			continue // past a Duration's 292 years: saturated
		}
		step := D * 0x1p-23
		ra, rs := a67ms(d.RetryAfter), a67ms(d.ResetAfter)
		exactRA, exactRS := 1/r*1000, D
		l2, c2 := mk()
		c2.Set(1_000_000 + ra)
		if !l2.PeekN(l2.Now(), "k", 1).Allowed {
			t.Errorf("New(%v, %d, MaxDebt %d): RetryAfter %v at the cap is early", r, b, b, d.RetryAfter)
		}
		l3, c3 := mk()
		c3.Set(1_000_000 + rs)
		if tk := l3.TokensAt(l3.Now(), "k"); tk < float64(b) {
			t.Errorf("New(%v, %d, MaxDebt %d): ResetAfter %v at the cap is early (%v tokens then)", r, b, b, d.ResetAfter, tk)
		}
		for _, x := range []struct {
			name       string
			got        int64
			exact, rnd float64
		}{{"RetryAfter", ra, exactRA, D * 0x1p-7}, {"ResetAfter", rs, exactRS, D * 0x1p-7}} {
			late := float64(x.got) - x.exact
			if late > x.rnd+step+2 {
				t.Errorf("New(%v, %d, MaxDebt %d): %s %d ms, exact %.1f: late %.1f ms, bound %.1f", r, b, b, x.name, x.got, x.exact, late, x.rnd+step+2)
			}
		}
		worst = max(worst, (float64(rs)-exactRS)/exactRS)
	}
	t.Logf("worst relative lateness of ResetAfter at the cap: %.3g", worst)
}
