package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87RdDecideFixedNoDecisionNextAfter: decide.go, DecideContext:
// "FailClosed's denial, and LocalFallback's for n above its Burst/N, say
// no retry time, RetryAfter 0, and are not Never"; the limit.Decision it
// returns promises (limit/decision.go, Decision.NextAfter): "On a denial
// it is at most RetryAfter". With the server killed, a FailClosed
// limiter at 10/s x 20 answers DecideContext(k, 1) with RetryAfter 0 and
// NextAfter 100ms (1/Rate, worked out from the Remaining 0 the policy
// made up), and ResetAfter 0 (the time until the debt drains to zero:
// a full bucket) beside Remaining 0; the LocalFallback over 4 instances
// answers n = 10 (above Burst/N = 5, within Burst) the same way. A
// caller of DecideContext that trusts the type's invariant (NextAfter <=
// RetryAfter on a denial) reads "one more token in 100 ms" from a
// decision that knows nothing of the key. Fixed (stop 56): these
// denials say NextAfter 0 (redis/decide.go, toDecision).
func TestAudit87RdDecideFixedNoDecisionNextAfter(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	lim := PerSecond(10, 20)
	mk := func(name string, pol Policy) *Limiter {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		return e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, Policy: pol, Instances: 4,
			ServerCheck: CheckSkip, Timeout: time.Second, CellsPerLevel: 64})
	}
	closed, fb := mk("a87rdnd-closed", FailClosed), mk("a87rdnd-fb", LocalFallback)
	e.srv.kill()
	ctx := context.Background()
	for _, c := range []struct {
		what string
		l    *Limiter
		n    int
	}{{"FailClosed, n=1", closed, 1}, {"LocalFallback over 4, n=10 (Burst/N 5 < n <= Burst 20)", fb, 10}} {
		d, err := c.l.DecideContext(ctx, "k", c.n)
		if !errors.Is(err, ErrDegraded) || d.Allowed || d.Never || d.RetryAfter != 0 {
			t.Fatalf("%s: %+v, %v; want the policy's denial with no retry time (decide.go)", c.what, d, err)
		}
		if d.NextAfter > d.RetryAfter {
			t.Errorf("%s: %+v: NextAfter %v above RetryAfter %v on a denial (limit.Decision: \"On a denial it is at most RetryAfter\"); Remaining %d with ResetAfter %v",
				c.what, d, d.NextAfter, d.RetryAfter, d.Remaining, d.ResetAfter)
		}
	}
}

// TestAudit87RdFallbackBoundaryDenial: the LocalFallback counts its debt
// in float32 tokens rounded up (limiter.go, newLimiter: "the fallback
// counts in tokens"), also for a limit the server holds in exact units.
// 10/s x 20 over 10 instances: the fallback is 1/s x 2. At t a request
// of 1, at t+1 ms another (debt 1.999, stored as the float32 above it),
// at t+1000 ms the rational bucket at 1/s x 2 owes exactly 1 and admits a
// request of 1 (so does package limit); the fallback owes an ulp more and
// may deny it. Asserted, the documented side (Decision.RetryAfter: never
// early, "a retry at RetryAfter fits"): a denial there says RetryAfter
// 1ms, and the retry at it is admitted; the fallback never admits at
// t+999 ms (the bucket owes 1.001 then). What it did is logged (audit
// 87's report: a 1 ms disagreement with package limit, on the safe side).
func TestAudit87RdFallbackBoundaryDenial(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	r := newFallbackRig(t, e, "a87rdbound", PerSecond(10, 20), 10, nil)
	e.srv.kill()
	ctx := context.Background()
	t0 := r.clk.NowMillis()
	for _, at := range []int64{0, 1} {
		r.clk.Set(t0 + at)
		if d, err := r.l.DecideContext(ctx, "k", 1); !errors.Is(err, ErrDegraded) || !d.Allowed {
			t.Fatalf("at +%d ms: %+v, %v; want the fallback's admission", at, d, err)
		}
	}
	r.clk.Set(t0 + 999)
	if d, _ := r.l.AllowN(ctx, "k", 0); d.Remaining >= 1 {
		t.Fatalf("at +999 ms Remaining %v; the bucket at 1/s x 2 owes 1.001 (room 0.999)", d.Remaining)
	}
	r.clk.Set(t0 + 1000)
	d, _ := r.l.DecideContext(ctx, "k", 1)
	t.Logf("at +1000 ms (the rational bucket owes exactly 1: admits): %+v", d)
	if !d.Allowed {
		if d.RetryAfter != time.Millisecond {
			t.Errorf("denied at +1000 ms with RetryAfter %v; the bucket admits now, so the wait is at most 1 ms", d.RetryAfter)
		}
		r.clk.Set(t0 + 1000 + d.RetryAfter.Milliseconds())
		if d2, _ := r.l.DecideContext(ctx, "k", 1); !d2.Allowed {
			t.Errorf("the retry at RetryAfter %v: %+v; Decision.RetryAfter: a retry at it fits", d.RetryAfter, d2)
		}
	}
}
