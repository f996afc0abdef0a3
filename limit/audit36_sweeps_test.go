package limit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Audit 36: package limit's count-min with debts that last across several
// horizon sweeps (a32Run from audit32_sweep_test.go drives the scenario:
// a key's burst at w, a denial with RetryAfter/ResetAfter, other keys'
// traffic every 6 h at a chosen ms offset so that the sweeps run at
// chosen instants, then PeekN at w+RetryAfter-1ms and w+RetryAfter and
// TokensAt at w+ResetAfter).
//
// Rules.Rebase (internal/atom/rules.go) steps the rounded value up the
// float32 grid, at most 64 steps, until the rounding is whole ms of
// drain; with a drain of d units per ms, d odd, that takes up to d steps.
// Short-fraction units beyond 2^24 reach d up to 4096
// (internal/units: maxExactDrain).

func a36Limit(rate limit.Limit, burst int, opts ...limit.Option) func(*limittest.FakeClock) (*limit.Limiter, a32Decider) {
	return func(clk *limittest.FakeClock) (*limit.Limiter, a32Decider) {
		l, err := limit.New(rate, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(36)}, opts...)...)
		if err != nil {
			panic(err)
		}
		return l, l
	}
}

func a36Allow(n int) func(*limit.Limiter, a32Decider, time.Time) error {
	return func(_ *limit.Limiter, d a32Decider, w time.Time) error {
		if !d.AllowN(w, "k", n) {
			return fmt.Errorf("a burst of %d from an empty key denied", n)
		}
		return nil
	}
}

// a36RunCases runs each case at the given traffic offsets and returns the
// broken promises, by case and offset.
func a36RunCases(cases []a32Case, offs []int64) (bad []string, runs int) {
	for _, c := range cases {
		for _, off := range offs {
			runs++
			if b := a32Run(c, off); len(b) > 0 {
				bad = append(bad, fmt.Sprintf("%s, traffic offset %d ms: %s", c.name, off, strings.Join(b, "; ")))
			}
		}
	}
	return bad, runs
}

// TestAudit36FixedRetryAfterEarlyLargeDrainAcrossSweeps: limit.New on
// the count-min with short-fraction units beyond 2^24 whose drain is more
// than 64 units a ms (4093/2^20 tokens a second: unit 2^23 x 125, drain
// 4093, internal/units' largest odd drain), a burst whose MaxDebt takes weeks to
// drain. limit/doc.go ("Exactness"): "RetryAfter predicts the
// limiter's own next decision to the millisecond: a retry at
// t+RetryAfter is admitted and one 1 ms earlier is not"; Decision.ResetAfter:
// "the time until the key's debt drains to zero". It was 1 ms early after
// a sweep: Rules.Rebase's search for an exact back-dating gave up after 64
// grid steps; it is now solved in closed form (atom.wholeDrain).
func TestAudit36FixedRetryAfterEarlyLargeDrainAcrossSweeps(t *testing.T) {
	testsize.Serial(t)
	cases := []a32Case{
		{name: "4093/2^20,burst4000,CountMin4x1024", build: a36Limit(4093.0/(1<<20), 4000, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)),
			fill: a36Allow(4000), n: 4000, w: 5 * a32Day},
		{name: "4093/2^20,burst8000,CountMin4x1024", build: a36Limit(4093.0/(1<<20), 8000, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)),
			fill: a36Allow(8000), n: 8000, w: 5 * a32Day},
		{name: "4093/2^20,burst8000,Auto", build: a36Limit(4093.0/(1<<20), 8000), fill: a36Allow(8000), n: 8000, w: 5 * a32Day},
	}
	bad, runs := a36RunCases(cases, []int64{0, 1, 2, 3, 5, 8, 13, 21})
	if len(bad) > 0 {
		t.Errorf("%d of %d runs broke RetryAfter/ResetAfter across the sweeps (limit/doc.go: \"a retry at t+RetryAfter is admitted and one 1 ms earlier is not\"):\n%s",
			len(bad), runs, strings.Join(bad, "\n"))
	}
}

// TestAudit36LargeDrain67AcrossSweeps: drain 67 (67/2^20 tokens a second),
// just past the 64 steps, burst 64 (MaxDebt drains in about 23 days):
// held at every traffic offset tried.
func TestAudit36LargeDrain67AcrossSweeps(t *testing.T) {
	cases := []a32Case{
		{name: "67/2^20,burst64,CountMin4x1024", build: a36Limit(67.0/(1<<20), 64, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)),
			fill: a36Allow(64), n: 64, w: 5 * a32Day},
	}
	if bad, runs := a36RunCases(cases, []int64{0, 1, 2, 3, 5, 8, 13, 21}); len(bad) > 0 {
		t.Errorf("%d of %d runs broke:\n%s", len(bad), runs, strings.Join(bad, "\n"))
	}
}

// TestAudit36LargeDrainNeverBelowTruth: the drain-4093 limiter
// (4093/2^20 tokens a second, burst 8000, count-min), a burst taken at w,
// then the clock stepped by about 2^29 ms (a sweep each time, run by
// another key's call) and now and then an idle jump past 2^31 ms (the
// urgent re-base): TokensAt never exceeds the exact bucket's tokens (the
// debt never reads below the truth), and PeekN never admits the whole
// burst before the exact bucket has drained.
func TestAudit36LargeDrainNeverBelowTruth(t *testing.T) {
	testsize.Serial(t)
	const rate = 4093.0 / (1 << 20)
	const burst = 8000
	for _, eng := range []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)} {
		clk := limittest.NewFakeClock()
		clk.Set(a32Start)
		l, err := limit.New(rate, burst, limit.WithClock(clk), limit.WithSeed(36), eng)
		if err != nil {
			t.Fatal(err)
		}
		w := time.UnixMilli(a32Start).Add(3 * a32Day)
		clk.SetTime(w)
		if !l.AllowN(w, "k", burst) {
			t.Fatal("setup: burst denied")
		}
		at := w
		for step := range 12 {
			dt := time.Duration(1<<29+step*7919) * time.Millisecond
			if step%4 == 3 {
				dt = time.Duration(1<<31+step*104729) * time.Millisecond
			}
			at = at.Add(dt)
			clk.SetTime(at)
			l.AllowN(at, "other", 1)
			el := float64(at.Sub(w).Milliseconds())
			exactTokens := min(float64(burst), rate*el/1000)
			got := l.TokensAt(at, "k")
			if got > exactTokens+1e-9 {
				t.Fatalf("step %d, %v after w: TokensAt = %.12g above the exact bucket's %.12g", step, at.Sub(w), got, exactTokens)
			}
			if exactTokens < burst && l.PeekN(at, "k", burst).Allowed {
				t.Fatalf("step %d: the whole burst admitted with the exact bucket at %.12g tokens", step, exactTokens)
			}
		}
	}
}
