package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60FallbackRetryAfterAtCapFloat32Burst: LocalFallback with
// the server down (Instances 1), limits counting tokens whose Burst a
// float32 holds: the full Burst taken from the fallback, then a request
// of n denied; at exactly its RetryAfter the same request is admitted.
// The control of the finding below.
func TestAudit60FallbackRetryAfterAtCapFloat32Burst(t *testing.T) {
	audit60FallbackAtCap(t, false)
}

// TestAudit60FixedFallbackRetryAfterEarlyAtCap: the same with a Burst a
// float32 does not hold (0.3/s x 30000001, 1e-6/s x 1000.3): the
// fallback's cell holds float32(Burst) rounded up and drains from there,
// but its waits are computed from QueryString, capped at Hi (Burst), so
// the RetryAfter is early by the float32 step's drain: at it, the same
// request is denied again (RetryAfter 3.333 s more at 0.3/s). The
// ordinary PerSecond(10, 100) with Instances 3 (the fallback at 10/3 per
// second, Burst 100/3, neither a float32) answers 1 token RetryAfter
// 300ms, 1 ms early.
// Decision.RetryAfter (limiter.go): "never early"; the LocalFallback's
// waits are late only "by floor(Burst/Rate / 2^29 ms) ms".
func TestAudit60FixedFallbackRetryAfterEarlyAtCap(t *testing.T) {
	audit60FallbackAtCap(t, true)
}

func audit60FallbackAtCap(t *testing.T, audit60FallbackFinding bool) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	cases := []struct {
		lim Limit
		n   float64
		N   uint32 // Instances (0: 1)
		l   *Limiter
		clk *sketchtest.FakeClock
	}{
		{lim: PerSecond(0.3, 30000002), n: 100}, // a float32
		{lim: PerSecond(1e-6, 1000.5), n: 1},    // a float32
		{lim: PerSecond(0.3, 30000001), n: 100},
		{lim: PerSecond(1e-6, 1000.3), n: 1},
		{lim: PerSecond(10, 100), n: 1, N: 3}, // Burst/N = 33.33..., Rate/N = 3.33...
	}
	if audit60FallbackFinding {
		cases = cases[2:]
	} else {
		cases = cases[:2]
	}
	for i := range cases {
		c := &cases[i]
		c.clk = sketchtest.NewFakeClock()
		c.clk.Set(1_000_000)
		c.l = e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a60fc%d", i), Limit: c.lim, Clock: c.clk,
			Policy: LocalFallback, Instances: c.N, ServerCheck: CheckSkip, Timeout: time.Second})
	}
	e.srv.kill()
	for _, c := range cases {
		l, clk := c.l, c.clk
		fbBurst := divDown(c.lim.Burst, max(c.N, 1)) // the fallback's, rounded down (audit 149)
		d, err := l.AllowN(ctx, "k", fbBurst)
		if !errors.Is(err, ErrDegraded) || !d.Allowed {
			t.Fatalf("%v: full burst from the fallback: %+v, %v", c.lim, d, err)
		}
		d, _ = l.AllowN(ctx, "k", c.n)
		if d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("%v: n=%v at full debt: %+v", c.lim, c.n, d)
		}
		clk.Advance(d.RetryAfter)
		d2, _ := l.AllowN(ctx, "k", c.n)
		if !d2.Allowed {
			t.Errorf("%v: the fallback denied n=%v with RetryAfter %v; at it, denied again: %+v; want admitted (Decision.RetryAfter: \"never early\")", c.lim, c.n, d.RetryAfter, d2)
		} else {
			t.Logf("%v: RetryAfter %v ok", c.lim, d.RetryAfter)
		}
	}
}

// TestAudit60FixedFallbackRetryAfterEarlyWholeTokens: the finding above
// with whole tokens only, on an ordinary configuration: PerSecond(10,
// 100), LocalFallback, Instances 3 (the fallback at 10/3 per second,
// Burst 100/3), the server down. 33 requests of 1 token are admitted;
// 200 ms later (0.667 token drained) one more is admitted, which puts
// the fallback's debt exactly at Burst/N, stored as the float32 above it;
// the next is denied with RetryAfter 300ms, and at exactly 300 ms the
// same request is denied again (RetryAfter 1ms): 1 ms early.
// Decision.RetryAfter (limiter.go): "never early".
func TestAudit60FixedFallbackRetryAfterEarlyWholeTokens(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a60fw", Limit: PerSecond(10, 100), Clock: clk,
		Policy: LocalFallback, Instances: 3, ServerCheck: CheckSkip, Timeout: time.Second})
	e.srv.kill()
	for i := range 33 {
		if d, err := l.Allow(ctx, "k"); !d.Allowed || !errors.Is(err, ErrDegraded) {
			t.Fatalf("admission %d: %+v, %v", i, d, err)
		}
	}
	// 200 ms drain 0.667 token; since audit 149 the fallback's Rate and
	// Burst are 10/3 and 100/3 rounded down, so the 34th, which puts the
	// debt at Burst/N, may need a millisecond more.
	clk.Advance(200 * time.Millisecond)
	for ms := 0; ; ms++ {
		if d, _ := l.Allow(ctx, "k"); d.Allowed {
			break
		} else if ms == 5 {
			t.Fatalf("the 34th, 205 ms later: %+v", d)
		}
		clk.Advance(time.Millisecond)
	}
	d, _ := l.Allow(ctx, "k")
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("the 35th: %+v", d)
	}
	clk.Advance(d.RetryAfter)
	if d2, _ := l.Allow(ctx, "k"); !d2.Allowed {
		t.Errorf("LocalFallback (Instances 3) of PerSecond(10, 100): denied with RetryAfter %v; at it, denied again: %+v; want admitted (Decision.RetryAfter: \"never early\")", d.RetryAfter, d2)
	}
}
