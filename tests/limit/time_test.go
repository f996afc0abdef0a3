package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"pgregory.net/rapid"
)

// TestStaleReserve: ReserveN with a t older than a time the limiter has
// already used decides at that later time, and measures the time to act
// from it: the requests never act before their tokens exist. Before, the
// act time was t + the wait, 100 ms early here.
func TestStaleReserve(t *testing.T) { forEngines(t, testStaleReserve) }

func testStaleReserve(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 10, 2, eng) // 10/s, MaxDebt 4
	t0 := clk.Now()
	l.AllowN(t0, "k", 2) // debt 2 at t0
	clk.Advance(100 * time.Millisecond)
	l.Allow("other") // the limiter is now at t0 + 100 ms
	r := l.ReserveN(t0, "k", 2)
	// At t0 + 100 ms the debt is 1; with 2 more it is 3: one token over
	// the burst, 100 ms to drain, so act at t0 + 200 ms.
	if !r.OK() || r.DelayFrom(t0.Add(200*time.Millisecond)) != 0 || r.DelayFrom(clk.Now()) != 100*time.Millisecond {
		t.Fatalf("stale reservation acts in %v from now (t0+100ms), want 100ms", r.DelayFrom(clk.Now()))
	}
}

// Decide with a stale t: RetryAfter, ResetAfter and NextAfter count from
// t, so t + RetryAfter is when the request fits, never earlier. Random
// lags, exact limiter: t + RetryAfter is exactly the time it fits.
func TestStaleDecide(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		l, clk := newFake(t, 10, 3, limit.WithEngine(rapid.SampledFrom(engines).Draw(rt, "engine")))
		for range rapid.IntRange(1, 50).Draw(rt, "ops") {
			clk.Advance(time.Duration(rapid.IntRange(0, 300).Draw(rt, "gap")) * time.Millisecond)
			l.Allow("clock") // the limiter reaches the clock's reading
			lag := time.Duration(rapid.IntRange(0, 200).Draw(rt, "lag")) * time.Millisecond
			n := rapid.IntRange(1, 3).Draw(rt, "n")
			tq := clk.Now().Add(-lag)
			d := l.DecideN(tq, "k", n)
			if d.Allowed {
				continue
			}
			due := tq.Add(d.RetryAfter)
			if due.Before(clk.Now()) {
				rt.Fatalf("stale t: RetryAfter %v from t is %v before the decision time", d.RetryAfter, clk.Now().Sub(due))
			}
			back := clk.Now()
			clk.SetTime(due.Add(-time.Millisecond))
			if !due.Add(-time.Millisecond).Before(back) && l.PeekN(clk.Now(), "k", n).Allowed {
				rt.Fatalf("fits 1 ms before t + RetryAfter (lag %v, RetryAfter %v)", lag, d.RetryAfter)
			}
			clk.SetTime(due)
			if !l.PeekN(clk.Now(), "k", n).Allowed {
				rt.Fatalf("does not fit at t + RetryAfter (lag %v, RetryAfter %v)", lag, d.RetryAfter)
			}
		}
	})
}

// TestFutureT: a t after the clock's reading counts as that reading (the
// one deviation from x/time/rate: all keys share one time scale, and a
// future t must not drain every other key early). The decision and every
// duration it returns are those at the clock's reading: AllowN(now+5s)
// of an empty key is denied, and ReserveN(now+5s) acts when its token
// exists, 1 s from now, not at now+5s+1s as before.
func TestFutureT(t *testing.T) { forEngines(t, testFutureT) }

func testFutureT(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 1, 1, eng) // MaxDebt 2
	l.Allow("k")
	future := clk.Now().Add(5 * time.Second)
	if l.AllowN(future, "k", 1) {
		t.Fatal("AllowN at now+5s admitted: the future t drained the key")
	}
	if d := l.DecideN(future, "k", 1); d.RetryAfter != time.Second {
		t.Fatalf("Decide at now+5s: RetryAfter %v, want 1s from the clock's reading", d.RetryAfter)
	}
	r := l.ReserveN(future, "k", 1)
	if !r.OK() || r.DelayFrom(clk.Now()) != time.Second {
		t.Fatalf("ReserveN at now+5s acts in %v, want 1s", r.DelayFrom(clk.Now()))
	}
	// Other keys were not moved ahead either.
	l.Allow("j")
	if l.Allow("j") {
		t.Fatal("another key drained by the future t")
	}
}

// TokensAt is x/time/rate's: burst - debt, fractional, negative while
// reservations are queued past the burst.
func TestTokensAt(t *testing.T) { forEngines(t, testTokensAt) }

func testTokensAt(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 10, 5, eng) // MaxDebt 10
	if got := l.TokensAt(clk.Now(), "k"); got != 5 {
		t.Fatalf("fresh key has %v tokens", got)
	}
	l.AllowN(clk.Now(), "k", 5)
	clk.Advance(150 * time.Millisecond)
	if got := l.TokensAt(clk.Now(), "k"); got != 1.5 {
		t.Fatalf("after 150 ms at 10/s: %v tokens, want 1.5", got)
	}
	l.ReserveN(clk.Now(), "k", 4)
	if got := l.TokensAt(clk.Now(), "k"); got != -2.5 {
		t.Fatalf("with 4 reserved: %v tokens, want -2.5", got)
	}
}
