package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 46: go-redis/redis_rate v10.0.1's own rate_test.go cases, ported
// to this module's Limiter on a fake clock (LimiterConfig.Clock), so the
// expected values are exact where redis_rate's test allows a 10 ms delta.
// Deliberate, documented differences are pinned:
//   - Allowed is a bool (limiter.go: "Decision is AllowN's answer, in the
//     shape of redis_rate's Result"; redis_rate's Allowed is the count
//     admitted, 0 for an n = 0 peek, which ours answers as allowed).
//   - RetryAfter is -1 when n > Burst (limiter.go: "-1 also when n > Burst
//     (it never fits)"; redis_rate answers ~99 s for n = 1000 at 10/s).
//   - Remaining on a denial is Burst minus the debt (limiter.go), where
//     redis_rate answers 0.
//   - No Reset, AllowAtMost, PerMinute or PerHour (not promised).

type a46Want struct {
	allowed   bool
	remaining float64
	retry     time.Duration
	reset     time.Duration
}

func a46Check(t *testing.T, l *Limiter, label, key string, n float64, w a46Want) Decision {
	t.Helper()
	d, err := l.AllowN(context.Background(), key, n)
	if err != nil {
		t.Fatalf("%s: AllowN(%v): %v", label, n, err)
	}
	if d.Allowed != w.allowed || d.Remaining != w.remaining || d.RetryAfter != w.retry || d.ResetAfter != w.reset {
		t.Errorf("%s: AllowN(%v) = {Allowed %v Remaining %v RetryAfter %v ResetAfter %v}; want {Allowed %v Remaining %v RetryAfter %v ResetAfter %v}",
			label, n, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, w.allowed, w.remaining, w.retry, w.reset)
	}
	return d
}

func a46Limiter(t *testing.T, e *env, name string, lim Limit, cache uint32) (*Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: e.ns(name), Limit: lim, Clock: clk, DenyCacheCells: cache, PreCheck: cache > 0})
	return l, clk
}

// TestAudit46PortTestAllow is redis_rate's TestAllow (PerSecond(10):
// 10/s, burst 10), time frozen; Reset replaced by a fresh key.
func TestAudit46PortTestAllow(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, cache := range []uint32{0, 256} {
			t.Run(fmt.Sprint("denycache=", cache), func(t *testing.T) {
				l, _ := a46Limiter(t, e, fmt.Sprint("a46allow", cache), PerSecond(10, 10), cache)
				a46Check(t, l, "Allow", "test_id", 1, a46Want{true, 9, -1, 100 * time.Millisecond})
				// redis_rate: Reset, then Allow again gives the same. Ours has no
				// per-key Reset: a fresh key.
				a46Check(t, l, "Allow after reset", "test_id2", 1, a46Want{true, 9, -1, 100 * time.Millisecond})
				a46Check(t, l, "AllowN 2", "test_id2", 2, a46Want{true, 7, -1, 300 * time.Millisecond})
				// redis_rate: 999ms +- 10ms (its float seconds); ours exact.
				a46Check(t, l, "AllowN 7", "test_id2", 7, a46Want{true, 0, -1, 1000 * time.Millisecond})
				// redis_rate: Allowed 0, Remaining 0, RetryAfter ~99s. Ours: -1
				// (documented: n > Burst never fits).
				a46Check(t, l, "AllowN 1000", "test_id2", 1000, a46Want{false, 0, -1, 1000 * time.Millisecond})
				// Not in redis_rate's test, same GCRA: a denied n=1 at the bottom
				// waits one emission interval.
				a46Check(t, l, "Allow at bottom", "test_id2", 1, a46Want{false, 0, 100 * time.Millisecond, 1000 * time.Millisecond})
			})
		}
	})
}

// TestAudit46PortIncrementZero is redis_rate's TestAllowN_IncrementZero
// (and TestAllowAtMost_IncrementZero, whose n = 0 calls are the same
// peek): an n = 0 call changes nothing and reports the key's state.
func TestAudit46PortIncrementZero(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		l, clk := a46Limiter(t, e, "a46zero", PerSecond(10, 10), 0)
		// redis_rate: Allowed 0 (the count: 0 of 0), Remaining 10,
		// RetryAfter -1, ResetAfter 0. Ours: allowed (a bool).
		a46Check(t, l, "peek fresh", "test_id", 0, a46Want{true, 10, -1, 0})
		a46Check(t, l, "Allow", "test_id", 1, a46Want{true, 9, -1, 100 * time.Millisecond})
		a46Check(t, l, "peek", "test_id", 0, a46Want{true, 9, -1, 100 * time.Millisecond})
		a46Check(t, l, "peek again", "test_id", 0, a46Want{true, 9, -1, 100 * time.Millisecond})
		// The peeks took nothing: 9 more fit, the 10th does not.
		a46Check(t, l, "AllowN 9", "test_id", 9, a46Want{true, 0, -1, time.Second})
		a46Check(t, l, "peek at the bottom", "test_id", 0, a46Want{true, 0, -1, time.Second})
		clk.Advance(250 * time.Millisecond)
		a46Check(t, l, "peek 250ms later", "test_id", 0, a46Want{true, 2.5, -1, 750 * time.Millisecond})
	})
}

// TestAudit46PortRetryAfter is redis_rate's TestRetryAfter: Rate 1 per
// ms, Burst 1; every denial's RetryAfter is at most 1 ms. Here on the
// fake clock: exactly 1 ms with time frozen, and admitted 1 ms later.
func TestAudit46PortRetryAfter(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		l, clk := a46Limiter(t, e, "a46retry", PerSecond(1000, 1), 0)
		for i := 0; i < 50; i++ {
			a46Check(t, l, fmt.Sprint("step ", i, " admit"), "test_id", 1, a46Want{true, 0, -1, time.Millisecond})
			a46Check(t, l, fmt.Sprint("step ", i, " deny"), "test_id", 1, a46Want{false, 0, time.Millisecond, time.Millisecond})
			clk.Advance(time.Millisecond)
		}
	})
}

// TestAudit46PortAllowAtMostSequence: redis_rate's TestAllowAtMost has no
// counterpart method; its AllowN calls (n = 0 peeks, n = 1000) at the
// same states, and a denial's Remaining (ours Burst minus the debt,
// redis_rate's 0: documented).
func TestAudit46PortAllowAtMostSequence(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		l, _ := a46Limiter(t, e, "a46atmost", PerSecond(10, 10), 0)
		a46Check(t, l, "Allow", "k", 1, a46Want{true, 9, -1, 100 * time.Millisecond})
		a46Check(t, l, "AllowN 2", "k", 2, a46Want{true, 7, -1, 300 * time.Millisecond})
		a46Check(t, l, "peek", "k", 0, a46Want{true, 7, -1, 300 * time.Millisecond})
		// Documented difference: Remaining on a denial is Burst - debt (7).
		a46Check(t, l, "AllowN 10 denied", "k", 10, a46Want{false, 7, 300 * time.Millisecond, 300 * time.Millisecond})
		a46Check(t, l, "AllowN 8 denied", "k", 8, a46Want{false, 7, 100 * time.Millisecond, 300 * time.Millisecond})
		a46Check(t, l, "AllowN 7", "k", 7, a46Want{true, 0, -1, time.Second})
		a46Check(t, l, "peek", "k", 0, a46Want{true, 0, -1, time.Second})
		a46Check(t, l, "AllowN 1000", "k", 1000, a46Want{false, 0, -1, time.Second})
	})
}

// TestAudit46PortRates: PerMinute(1), PerHour(100), 10/s with fractional
// n, the durations exact on the fake clock.
func TestAudit46PortRates(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		t.Run("PerMinute(1)", func(t *testing.T) {
			l, clk := a46Limiter(t, e, "a46min", PerSecond(1.0/60, 1), 0)
			a46Check(t, l, "Allow", "k", 1, a46Want{true, 0, -1, time.Minute})
			a46Check(t, l, "Allow denied", "k", 1, a46Want{false, 0, time.Minute, time.Minute})
			clk.Advance(59*time.Second + 999*time.Millisecond)
			d, err := l.AllowN(context.Background(), "k", 1)
			if err != nil || d.Allowed || d.RetryAfter != time.Millisecond || d.ResetAfter != time.Millisecond {
				t.Errorf("1 ms before: %+v, %v; want denied, RetryAfter 1ms, ResetAfter 1ms", d, err)
			}
			clk.Advance(time.Millisecond)
			a46Check(t, l, "Allow after 60s", "k", 1, a46Want{true, 0, -1, time.Minute})
		})
		t.Run("PerHour(100)", func(t *testing.T) {
			l, clk := a46Limiter(t, e, "a46hour", PerSecond(100.0/3600, 100), 0)
			for i := 1; i <= 100; i++ {
				d, err := l.Allow(context.Background(), "k")
				if err != nil || !d.Allowed || d.Remaining != float64(100-i) || d.ResetAfter != time.Duration(i)*36*time.Second {
					t.Fatalf("Allow %d: %+v, %v; want allowed, Remaining %d, ResetAfter %v", i, d, err, 100-i, time.Duration(i)*36*time.Second)
				}
			}
			a46Check(t, l, "101st", "k", 1, a46Want{false, 0, 36 * time.Second, time.Hour})
			clk.Advance(36 * time.Second)
			a46Check(t, l, "36s later", "k", 1, a46Want{true, 0, -1, time.Hour})
			a46Check(t, l, "AllowN 100 (= burst) denied", "k", 100, a46Want{false, 0, time.Hour, time.Hour})
			a46Check(t, l, "AllowN 101 (> burst)", "k", 101, a46Want{false, 0, -1, time.Hour})
		})
		t.Run("fractional n at 10/s", func(t *testing.T) {
			l, clk := a46Limiter(t, e, "a46frac", PerSecond(10, 10), 0)
			a46Check(t, l, "0.5", "k", 0.5, a46Want{true, 9.5, -1, 50 * time.Millisecond})
			a46Check(t, l, "9.25", "k", 9.25, a46Want{true, 0.25, -1, 975 * time.Millisecond})
			a46Check(t, l, "0.5 denied", "k", 0.5, a46Want{false, 0.25, 25 * time.Millisecond, 975 * time.Millisecond})
			clk.Advance(25 * time.Millisecond)
			a46Check(t, l, "0.5 after 25ms", "k", 0.5, a46Want{true, 0, -1, time.Second})
		})
	})
}
