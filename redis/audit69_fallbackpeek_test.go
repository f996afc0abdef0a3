package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// a69DownLimiter is a Limiter whose server is never reachable (a closed
// loopback port, one dial per call, no retry), on a fake clock: every
// call is decided by pol.
func a69DownLimiter(t *testing.T, name string, lim Limit, pol Policy, inst uint32, clk *sketchtest.FakeClock) *Limiter {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { gc.Close() })
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: name, Limit: lim, Policy: pol, Instances: inst,
		ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// a69RetryLateness drives key to a LocalFallback denial, optionally peeks
// (AllowN(key, 0)) at every ms of the wait, and returns the wait the
// denial gave and the first ms (from the denial) at which AllowN(key, 1)
// is admitted.
func a69RetryLateness(t *testing.T, l *Limiter, clk *sketchtest.FakeClock, key string, peek bool) (wait, first int64) {
	t.Helper()
	ctx := context.Background()
	var d Decision
	var err error
	for {
		d, err = l.AllowN(ctx, key, 1)
		if !errors.Is(err, ErrDegraded) {
			t.Fatalf("AllowN with the server down: err %v, want ErrDegraded", err)
		}
		if !d.Allowed {
			break
		}
	}
	t0 := clk.NowMillis()
	wait = d.RetryAfter.Milliseconds()
	if wait <= 0 {
		t.Fatalf("fallback denial without a wait: %+v", d)
	}
	if peek {
		for ms := int64(1); ms < wait; ms++ {
			clk.Set(t0 + ms)
			if p, err := l.AllowN(ctx, key, 0); !p.Allowed || !errors.Is(err, ErrDegraded) {
				t.Fatalf("peek at +%d ms: %+v, %v", ms, p, err)
			}
		}
	}
	for ms := wait; ; ms++ {
		clk.Set(t0 + ms)
		if r, _ := l.AllowN(ctx, key, 1); r.Allowed {
			return wait, ms
		}
		if ms > wait+10_000 {
			t.Fatalf("no admission within 10 s after RetryAfter %d ms", wait)
		}
	}
}

// TestAudit69FallbackRetryAtRetryAfter: the control for the finding below.
// Without peeks, a LocalFallback denial's RetryAfter is exact here (the
// retry at it is admitted) at five limits over 3
// instances.
func TestAudit69FallbackRetryAtRetryAfter(t *testing.T) {
	for _, lim := range []Limit{PerSecond(1000.0/13, 7), PerSecond(10, 10), PerSecond(100, 10), PerSecond(1, 5), PerSecond(0.7, 7)} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l := a69DownLimiter(t, "a69ctl", lim, LocalFallback, 3, clk)
		for i := range 3 {
			wait, first := a69RetryLateness(t, l, clk, "k"+strconv.Itoa(i), false)
			if first != wait {
				t.Errorf("%+v key %d: RetryAfter %d ms, first admission at %d ms", lim, i, wait, first)
			}
			clk.Set(clk.NowMillis() + 1_000_000)
		}
	}
}

// TestAudit69FixedFallbackPeekWrites (fixed in stop 47): AllowN(key, 0) is a peek that
// "writes nothing" (limiter.go, AllowN's doc), and the server path reads
// only (audit 46: a write of 0 re-stores every cell rounded up to
// float32). Under LocalFallback a peek is TryUpdateString(key, 0, Burst/N)
// on the fallback sketch: a write of 0 that re-stores the key's cells
// rounded up to float32, so peeks during a wait raise the key's debt and
// the fallback's RetryAfter, "otherwise exact" (Decision.RetryAfter) and
// exact without peeks (the control above), is early: the retry at it is
// denied.
func TestAudit69FixedFallbackPeekWrites(t *testing.T) {
	for _, lim := range []Limit{PerSecond(1000.0/13, 7), PerSecond(10, 10), PerSecond(100, 10), PerSecond(1, 5), PerSecond(0.7, 7)} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l := a69DownLimiter(t, "a69peek", lim, LocalFallback, 3, clk)
		for i := range 3 {
			wait, first := a69RetryLateness(t, l, clk, "k"+strconv.Itoa(i), true)
			if first != wait {
				t.Errorf("%+v over 3 instances, server down, key %d: RetryAfter %d ms, peeks (AllowN n=0) at every ms of the wait, "+
					"then the retry at %d ms denied; first admitted at %d ms (%d ms early). AllowN's doc: \"n = 0 only reads (a peek ...) "+
					"and it writes nothing\"; the same limiter without peeks is admitted exactly at RetryAfter",
					lim, i, wait, wait, first, first-wait)
			}
			clk.Set(clk.NowMillis() + 1_000_000)
		}
	}
}

// TestAudit69FixedFailClosedPeekDenied (fixed in the docs, stop 47:
// AllowN's doc now says "under a fault FailOpen and LocalFallback allow
// it and FailClosed denies it, as it denies everything"; checked: denied,
// a PolicyDenial, with ErrDegraded). The audit quoted AllowN's doc: "n = 0 only reads
// (a peek, as in redis_rate): always allowed, with the key's Remaining and
// ResetAfter, and it writes nothing." With the server down, FailClosed
// answers a peek Allowed=false (and counts it as a PolicyDenial), while
// LocalFallback answers it allowed (audit 17) and FailOpen allowed: a
// peek admits nothing, so "a limiter that cannot count does not admit"
// (FailClosed's doc) does not call for a denial. (Low severity: the doc's
// "always" and the policy table disagree; the error says degraded.)
func TestAudit69FixedFailClosedPeekDenied(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := a69DownLimiter(t, "a69fcpeek", PerSecond(1, 5), FailClosed, 1, clk)
	d, err := l.AllowN(context.Background(), "k", 0)
	if !errors.Is(err, ErrDegraded) {
		t.Fatalf("server down: err %v, want ErrDegraded", err)
	}
	if d.Allowed || l.Stats().PolicyDenials != 1 {
		t.Errorf("FailClosed, server down: AllowN(k, 0) = %+v (Stats %+v); want denied by the policy (AllowN's doc: \"FailClosed denies it, as it denies everything\")", d, l.Stats())
	}
}
