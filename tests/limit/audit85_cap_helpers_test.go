package limit_test

// Audit 85, capacity and saturation: shared helpers of the
// audit85_cap_*_test.go files. Every limiter here runs on a frozen or
// stepped fake clock with a fixed hash seed, so every count is
// deterministic; the statistical bounds below are what a correct limiter
// may show for any seed, each with a false-failure probability below
// 1e-9.

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// audit85capFail is the false-failure probability every statistical
// assertion of these files allows (per assertion).
const audit85capFail = 1e-9

// audit85capKL is the Kullback-Leibler divergence of Bernoulli(a) from
// Bernoulli(p).
func audit85capKL(a, p float64) float64 {
	term := func(x, y float64) float64 {
		if x == 0 {
			return 0
		}
		return x * math.Log(x/y)
	}
	return term(a, p) + term(1-a, 1-p)
}

// audit85capUpper returns the smallest count k > n p such that, for X
// Binomial(n, q) with any q <= p, P(X >= k) <= fail, by the Chernoff
// bound P(X >= k) <= exp(-n KL(k/n || p)) (exact for the binomial tail,
// no normal approximation). A count at or above it refutes "rate <= p".
func audit85capUpper(n int, p, fail float64) int {
	if p >= 1 {
		return n + 1
	}
	lf := -math.Log(fail)
	k := int(math.Floor(float64(n)*p)) + 1
	for k <= n && float64(n)*audit85capKL(float64(k)/float64(n), p) < lf {
		k++
	}
	return k
}

// audit85capLower returns the largest count k < n p such that, for X
// Binomial(n, q) with any q >= p, P(X <= k) <= fail (Chernoff, as
// audit85capUpper). A count at or below it refutes "rate >= p".
func audit85capLower(n int, p, fail float64) int {
	if p <= 0 {
		return -1
	}
	lf := -math.Log(fail)
	k := int(math.Ceil(float64(n)*p)) - 1
	for k >= 0 && float64(n)*audit85capKL(float64(k)/float64(n), p) < lf {
		k--
	}
	return k
}

// audit85capNew builds limit.New(10, 20) (token 100 ms, MaxDebt 40: 4 s
// of drain) on engine e with a fake clock at a non-zero time and seed
// seed, plus opts; it fails the test on an error or on another engine.
func audit85capNew(t testing.TB, e limit.Engine, seed uint64, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(e)}, opts...)...)
	if err != nil {
		t.Fatalf("New(10, 20) on %v: %v", e, err)
	}
	if l.Engine() != e {
		t.Fatalf("New(10, 20) with WithEngine(%v) runs on %v", e, l.Engine())
	}
	return l, clk
}

// audit85capFill puts keys prefix0..prefix(to-1), from from on, at their
// limit at now: each asks for its whole burst (20), and with maxDebt it
// then reserves another burst, which takes it to MaxDebt (40). It
// returns how many got their burst.
func audit85capFill(l *limit.Limiter, now time.Time, prefix string, from, to int, maxDebt bool) int {
	got := 0
	for i := from; i < to; i++ {
		k := prefix + strconv.Itoa(i)
		if l.AllowN(now, k, 20) {
			got++
		}
		if maxDebt {
			l.ReserveN(now, k, 20)
		}
	}
	return got
}

// audit85capProbe counts how many of probes fresh keys (prefix0...,
// never used) PeekN would deny one token at at: it writes nothing.
func audit85capProbe(l *limit.Limiter, at time.Time, prefix string, probes int) int {
	denied := 0
	for i := range probes {
		if !l.PeekN(at, prefix+strconv.Itoa(i), 1).Allowed {
			denied++
		}
	}
	return denied
}

// audit85capSatAgrees reports whether a Saturation reading sat agrees
// with denied of probes fresh peeks within a relative tolerance rel:
// the count refutes neither "rate <= sat (1+rel)" nor "rate >= sat
// (1-rel)" at audit85capFail (plus one count either way for a reading
// of 0, where the measured rate can only be the fingerprint matches the
// reading's sample missed).
func audit85capSatAgrees(sat float64, denied, probes int, rel float64) bool {
	hi := min(1, sat*(1+rel))
	lo := max(0, sat*(1-rel))
	return denied < audit85capUpper(probes, hi, audit85capFail)+1 && denied > audit85capLower(probes, lo, audit85capFail)-1
}
