package redis

import (
	"context"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60FixedDenyCacheRetryAfterEarlyAcrossServerRebase: one instance, the
// deny cache, Limit{1000 x pi/s, 1e6} (tokens; sweepSlack 0). The cache
// learns k's debt from a server denial 9 s before the generation's first
// rebase can come, then denies a request n chosen so that its exact wait
// is W = 20 s less 0.0005 token of drain (a margin far below one float32
// step of the debt, 0.03125; the debt learned within 0.002 of the
// server's). Within that wait a write of another key
// rebases the generation (at a ms where the rebase's float32 round-up of
// k's decayed debt is more than 0.01 token), and at exactly the cache's
// RetryAfter the server is asked (read-only Query) whether n fits.
// Decision.RetryAfter: "never early"; docs/distributed.md: "with one
// instance a local denial's waits are the server's (... late by up to
// the learn's float32 step and the sweep slack above, never early)".
//
// Found: the cache answers RetryAfter 20 s (the debt's linear wait), the
// server 20.001 s for the same request at the same ms (its rebaseSlack:
// a rebase can come within the wait); the rebase comes, and at 20 s the
// server's debt is 0.019 token above room: the retry at the cache's
// RetryAfter is denied (RetryAfter 1ms).
func TestAudit60FixedDenyCacheRetryAfterEarlyAcrossServerRebase(t *testing.T) {
	audit60RebaseWindow(t, true)
}

// TestAudit60DenyCacheRetryAfterNoRebaseInWindow: the control: the same
// without the rebasing write; the cache's 20 s is exact (the server has
// room at it and the retry is admitted).
func TestAudit60DenyCacheRetryAfterNoRebaseInWindow(t *testing.T) {
	audit60RebaseWindow(t, false)
}

func audit60RebaseWindow(t *testing.T, rebase bool) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	const c0 = 1_780_000_000_000
	clk.Set(c0)
	lim := PerSecond(1000*math.Pi, 1e6)
	cfg := LimiterConfig{Name: "a60rw", Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024}
	l := e.limiter(t, cfg)
	cfg.DenyCacheCells = 0
	plain := e.limiter(t, cfg)
	or := newAudit60Oracle(t, e, l)
	if l.cache == nil || l.cache.slack != 0 || l.unit != 1 {
		t.Fatalf("setup: want a deny cache counting tokens, no sweep slack; got unit %v", l.unit)
	}
	ctx := context.Background()
	other := a28Disjoint(t, l, "k")
	if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	T := int64(c0 + defaultRebaseAt - 10_000)
	clk.Set(T)
	if d, err := l.AllowN(ctx, "k", 5e5); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	// t1: a ms where the server's decayed debt (5e5 drained since T, as
	// sketch.lua computes it) lies just below a float32, so the cache
	// learns it within 0.002 token.
	t1 := int64(0)
	for m := T + 1000; m < T+3000; m++ {
		v := 5e5 - lim.Rate*float64(m-T)/1000
		if float64(float32ceil(v))-v < 0.002 {
			t1 = m
			break
		}
	}
	if t1 == 0 {
		t.Fatal("setup: no t1")
	}
	clk.Set(t1)
	if d, err := l.AllowN(ctx, "k", lim.Burst); err != nil || d.Allowed || l.Stats().CacheDenials != 0 {
		t.Fatalf("setup: AllowN(Burst) = %+v, %v; want the server's denial", d, err)
	}
	cd := l.cache.sk.Load().QueryString("k")
	est := or.debtAt(t, "k", t1)
	if cd < est || cd > est+l.cache.learn {
		t.Fatalf("setup: the cache learned %v; the server's debt %v", cd, est)
	}
	const W = 20_000
	n := lim.Burst - cd + lim.Rate*W/1000 - 0.0005
	t.Logf("cache debt %v, server debt %v (diff %v)", cd, est, cd-est)
	// The rebase ms: after c0 + 2^31, before t1 + W, where the round-up
	// of k's decayed debt is large.
	rb := int64(0)
	for m := int64(c0 + defaultRebaseAt); m < t1+W-1000; m++ {
		v := est - lim.Rate*float64(m-t1)/1000
		if f := float64(float32ceil(v)); f-v > 0.01 {
			rb = m
			break
		}
	}
	if rb == 0 {
		t.Fatal("setup: no rebase ms with a large round-up")
	}
	sd, err := plain.AllowN(ctx, "k", n)
	if err != nil || sd.Allowed {
		t.Fatalf("setup: the server's answer for n: %+v, %v", sd, err)
	}
	d, err := l.AllowN(ctx, "k", n)
	if err != nil || d.Allowed || l.Stats().CacheDenials != 1 {
		t.Fatalf("setup: want the cache's denial of n=%v: %+v, %v, %+v", n, d, err, l.Stats())
	}
	if rebase {
		clk.Set(rb)
		if err := l.Sketch().Update(ctx, other, 0); err != nil {
			t.Fatal(err)
		}
	}
	at := t1 + d.RetryAfter.Milliseconds()
	q := or.debtAt(t, "k", at)
	t.Logf("cache RetryAfter %v, server RetryAfter %v (asked at the same ms), rebase at t1+%d ms; at t1+RetryAfter the server's debt %v + n %v - Burst = %v", d.RetryAfter, sd.RetryAfter, rb-t1, q, n, q+n-lim.Burst)
	if q+n > lim.Burst {
		t.Errorf("the deny cache's RetryAfter %v is early: at it the server's debt is %v, %v above room for n=%v (the rebase at t1+%d ms rounded k's debt up); the server's own RetryAfter for the same request was %v; want at least the server's (Decision.RetryAfter: \"never early\"; docs/distributed.md: \"with one instance a local denial's waits are the server's\")", d.RetryAfter, q, q+n-lim.Burst, n, rb-t1, sd.RetryAfter)
	}
	clk.Set(at)
	if d2, err := l.AllowN(ctx, "k", n); err != nil || !d2.Allowed {
		t.Errorf("the retry at the cache's RetryAfter: %+v, %v (%+v)", d2, err, l.Stats())
	}
}
