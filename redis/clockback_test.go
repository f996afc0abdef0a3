package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A clock that steps back behind the time a sketch string was created (or
// rebased) must not make RetryAfter and ResetAfter early: the server runs
// the call at its high-water time tm, and the waits count from the
// clock's own reading, tm - now longer (found by audit16: the server
// answered the wait from tm, so the same request retried after RetryAfter
// was denied again until the clock passed tm).

// retryHonoured creates the string at create, takes the whole burst at
// take, moves the clock to at, asks for one token, waits the RetryAfter
// it gets and asks again: Decision.RetryAfter is "the exact wait, rounded
// up to the ms, after which the same request fits if nothing else is
// admitted meanwhile (never early)". ResetAfter is checked the same way:
// at at+ResetAfter the whole burst fits, 1 ms earlier it does not.
func retryHonoured(t *testing.T, e *env, cfg LimiterConfig, create, take, at int64) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(create)
	cfg.Limit, cfg.Clock = PerSecond(10, 10), clk
	l := e.limiter(t, cfg)
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "other", 0); err != nil || !d.Allowed { // creates the string at create
		t.Fatalf("AllowN(other, 0) = %+v, %v", d, err)
	}
	clk.Set(take)
	if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("AllowN(10) at %d = %+v, %v", take, d, err)
	}
	clk.Set(at) // the clock steps back
	wantRetry := time.Duration(take+100-at) * time.Millisecond
	wantReset := time.Duration(take+1000-at) * time.Millisecond
	if d, err := l.AllowN(ctx, "k", 0); err != nil || !d.Allowed || d.ResetAfter != wantReset {
		t.Fatalf("AllowN(0) at %d after 10 taken at %d = %+v, %v; want admitted, ResetAfter %v", at, take, d, err, wantReset)
	}
	d, err := l.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("AllowN(1) at %d = %+v, %v; want denied with a RetryAfter", at, d, err)
	}
	if d.RetryAfter != wantRetry || d.ResetAfter != wantReset {
		t.Fatalf("AllowN(1) at %d after 10 taken at %d = %+v; want RetryAfter %v, ResetAfter %v", at, take, d, wantRetry, wantReset)
	}
	// Asked again at once (the deny cache, when there is one, answers):
	// the same waits.
	if d2, err := l.AllowN(ctx, "k", 1); err != nil || d2 != d {
		t.Fatalf("AllowN(1) again at %d = %+v, %v; want %+v", at, d2, err, d)
	}
	// Asked again 1 ms before RetryAfter (the deny cache, when there is
	// one, answers): denied, with the wait that is left.
	clk.Advance(d.RetryAfter - time.Millisecond)
	if d2, err := l.AllowN(ctx, "k", 1); err != nil || d2.Allowed || d2.RetryAfter != time.Millisecond {
		t.Fatalf("AllowN(1) 1ms before RetryAfter %v = %+v, %v; want denied, RetryAfter 1ms", d.RetryAfter, d2, err)
	}
	clk.Advance(time.Millisecond)
	if d2, err := l.AllowN(ctx, "k", 1); err != nil || !d2.Allowed {
		t.Fatalf("clock stepped back from %d to %d (string created at %d): RetryAfter was %v, yet AllowN(1) after it = %+v, %v; want admitted",
			take, at, create, d.RetryAfter, d2, err)
	}
}

func TestClockBackRetryAfter(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, tc := range []struct {
		name               string
		cfg                LimiterConfig
		create, take, back int64
	}{
		{"behind the last write only", LimiterConfig{Name: "cbctl"}, 10_000, 11_000, 10_500},
		{"an hour behind the last write", LimiterConfig{Name: "cbhour"}, 10_000, 3_610_000, 10_000},
		{"behind the creation", LimiterConfig{Name: "cbnew"}, 10_000, 10_000, 9_000},
		{"behind the creation, deny cache", LimiterConfig{Name: "cbdc", DenyCacheCells: 1024}, 10_000, 10_000, 9_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retryHonoured(t, e, tc.cfg, tc.create, tc.take, tc.back)
		})
	}
}

// TestClockBackRotation: with rotation the call runs at the newest
// generation's hw when the clock is behind it; its waits count from the
// clock.
func TestClockBackRotation(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(60_000) // the ring's generation 1 is created at 60s
	s := e.sketch(t, Config{Name: "cbrot", Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(10), Lo: 0, Hi: 10,
		Aggregator: sketch.Min, Period: time.Minute, Clock: clk})
	ctx := context.Background()
	h := s.hasher.Sum64String("k")
	if r, err := s.tryUpdate(ctx, h, 10, 10); err != nil || !r.ok {
		t.Fatalf("tryUpdate(10) at 60s = %+v, %v", r, err)
	}
	clk.Set(59_000) // behind generation 1's hw, inside generation 0's period
	r, err := s.tryUpdate(ctx, h, 1, 10)
	if err != nil || r.ok || r.retryMs != 1100 || r.resetMs != 2000 {
		t.Fatalf("tryUpdate(1) 1s behind = %+v, %v; want denied, retry 1100 ms, reset 2000 ms", r, err)
	}
	clk.Set(60_099)
	if r, err := s.tryUpdate(ctx, h, 1, 10); err != nil || r.ok || r.retryMs != 1 {
		t.Fatalf("tryUpdate(1) at 60.099s = %+v, %v; want denied, retry 1 ms", r, err)
	}
	clk.Set(60_100)
	if r, err := s.tryUpdate(ctx, h, 1, 10); err != nil || !r.ok {
		t.Fatalf("tryUpdate(1) at 60.1s = %+v, %v; want admitted", r, err)
	}
}

// TestClockBackFallback: the local fallback's waits count from the clock
// too, when it stepped back behind the fallback sketch's time.
func TestClockBackFallback(t *testing.T) {
	// Nothing listens on a free port: every round trip fails at once.
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { gc.Close() })
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "cbfb", Limit: PerSecond(10, 10), Policy: LocalFallback,
		ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 10); !errors.Is(err, ErrDegraded) || !d.Allowed || d.ResetAfter != time.Second {
		t.Fatalf("AllowN(10), server down = %+v, %v; want admitted by the fallback, ResetAfter 1s", d, err)
	}
	clk.Set(9_000)
	d, err := l.AllowN(ctx, "k", 1)
	if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != 1100*time.Millisecond || d.ResetAfter != 2*time.Second {
		t.Fatalf("AllowN(1) 1s behind, server down = %+v, %v; want denied, RetryAfter 1.1s, ResetAfter 2s", d, err)
	}
	clk.Advance(d.RetryAfter - time.Millisecond)
	if d, err := l.AllowN(ctx, "k", 1); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("AllowN(1) 1ms before RetryAfter = %+v, %v; want denied, RetryAfter 1ms", d, err)
	}
	clk.Advance(time.Millisecond)
	if d, err := l.AllowN(ctx, "k", 1); !d.Allowed {
		t.Fatalf("AllowN(1) at RetryAfter = %+v, %v; want admitted", d, err)
	}
}

// TestClockBackDenyCacheUnlearnable: a debt the server dates so far
// ahead (a cell stamped 11 s after the clock's reading, by another
// instance) that the linear debt draining to 0 at its ResetAfter is above
// Burst cannot be held by the deny cache; a cache holding the key lower
// (from an earlier denial) must then forget it, not answer from it: B
// holds k at 1 token of debt when the server reports 10 undrained for 11 s
// more, and B's next request of 9.5 must get the server's wait (about
// 20.5 s), not the cache's 0.5 s.
func TestClockBackDenyCacheUnlearnable(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000)
	cfg := LimiterConfig{Name: "cbunlearn", Limit: PerSecond(1, 10), Clock: clk, DenyCacheCells: 1024}
	a := e.limiter(t, cfg)
	b := e.limiter(t, cfg)
	ctx := context.Background()
	if d, err := b.AllowN(ctx, "k", 5); err != nil || !d.Allowed {
		t.Fatalf("B.AllowN(5) at 5s = %+v, %v", d, err)
	}
	if d, err := b.AllowN(ctx, "k", 6); err != nil || d.Allowed {
		t.Fatalf("B.AllowN(6) at 5s = %+v, %v; want denied (B's cache learns debt 5)", d, err)
	}
	clk.Set(20_000)
	if d, err := a.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("A.AllowN(10) at 20s = %+v, %v", d, err)
	}
	clk.Set(9_000) // back; B's own time is 5s, so B is not behind
	d, err := b.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 12*time.Second {
		t.Fatalf("B.AllowN(1) at 9s = %+v, %v; want denied by the server, RetryAfter 12s", d, err)
	}
	d, err = b.AllowN(ctx, "k", 9.5)
	if err != nil || d.Allowed || d.RetryAfter != 20500*time.Millisecond {
		t.Fatalf("B.AllowN(9.5) at 9s = %+v, %v (cache denials %d); want the server's RetryAfter 20.5s",
			d, err, b.Stats().CacheDenials)
	}
}
