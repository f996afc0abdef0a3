package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Tests that kill the mutants of the clock-back change that the suite
// let live (audit17; /work/notes/audit17_out/mutate.py).

// TestAudit17LagOneMs: a clock 1 ms behind still makes every wait 1 ms
// longer, on the server and in the deny cache (kills lag() ignoring a
// gap of 1 ms, localtime.go).
func TestAudit17LagOneMs(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	retryHonoured(t, e, LimiterConfig{Name: "a17one"}, 10_000, 10_000, 9_999)
	retryHonoured(t, e, LimiterConfig{Name: "a17onedc", DenyCacheCells: 1024}, 10_000, 10_000, 9_999)
}

// a17Fallback returns a LocalFallback limiter whose server is down.
func a17Fallback(t *testing.T, name string, clk *sketchtest.FakeClock) *Limiter {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { gc.Close() })
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: name, Limit: PerSecond(10, 10), Policy: LocalFallback,
		ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit17FallbackAdmitLag: an admission by the local fallback with the
// clock behind the fallback's time answers its ResetAfter from the clock
// (kills the admitted branch of fault dropping the lag, limiter.go), and
// a 1 ms lag counts too.
func TestAudit17FallbackAdmitLag(t *testing.T) {
	for _, back := range []int64{1, 1000} {
		clk := sketchtest.NewFakeClock()
		clk.Set(10_000)
		l := a17Fallback(t, "a17fba", clk)
		ctx := context.Background()
		if d, err := l.AllowN(ctx, "k", 5); !errors.Is(err, ErrDegraded) || !d.Allowed || d.ResetAfter != 500*time.Millisecond {
			t.Fatalf("AllowN(5) = %+v, %v; want admitted, ResetAfter 500ms", d, err)
		}
		clk.Set(10_000 - back)
		want := time.Duration(back+600) * time.Millisecond
		d, err := l.AllowN(ctx, "k", 1)
		if !errors.Is(err, ErrDegraded) || !d.Allowed || d.ResetAfter != want {
			t.Fatalf("AllowN(1) %d ms behind = %+v, %v; want admitted, ResetAfter %v", back, d, err, want)
		}
		// At ResetAfter the whole burst fits; 1 ms before, it does not.
		clk.Advance(d.ResetAfter - time.Millisecond)
		if d, _ := l.AllowN(ctx, "k", 10); d.Allowed || d.RetryAfter != time.Millisecond {
			t.Fatalf("AllowN(10) 1 ms before ResetAfter = %+v; want denied, RetryAfter 1ms", d)
		}
		clk.Advance(time.Millisecond)
		if d, _ := l.AllowN(ctx, "k", 10); !d.Allowed {
			t.Fatalf("AllowN(10) at ResetAfter = %+v; want admitted", d)
		}
	}
}

// TestAudit17RebaseStampAhead: a rebase keeps a cell stamped after the
// call's time at its own time (sketch.lua rebase: ns = stamp - rel). A
// constant rebase threshold never meets such a cell (every stamp lies
// within the threshold of the epoch), so the threshold is lowered after
// the write, as an instance configured with a lower one would find it.
func TestAudit17RebaseStampAhead(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a17rsa", Limit: PerSecond(10, 10), Clock: clk})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "other", 0); err != nil || !d.Allowed { // the string, at 1000 s
		t.Fatalf("AllowN(other, 0) = %+v, %v", d, err)
	}
	clk.Set(1_010_000)
	if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("AllowN(10) at 1010 s = %+v, %v", d, err)
	}
	l.Sketch().setRebaseAt(2_000)
	clk.Set(1_005_000) // behind k's write, 5 s past the epoch: the next write rebases
	if d, err := l.AllowN(ctx, "other", 0); err != nil || !d.Allowed {
		t.Fatalf("AllowN(other, 0) at 1005 s (rebase) = %+v, %v", d, err)
	}
	d, err := l.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 5100*time.Millisecond || d.ResetAfter != 6*time.Second {
		t.Fatalf("AllowN(k, 1) at 1005 s after the rebase = %+v, %v; want denied, RetryAfter 5.1s, ResetAfter 6s", d, err)
	}
	clk.Set(1_010_099)
	if d, err := l.AllowN(ctx, "k", 1); err != nil || d.Allowed {
		t.Fatalf("AllowN(k, 1) at 1010.099 s = %+v, %v; want denied", d, err)
	}
	clk.Set(1_010_100)
	if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("AllowN(k, 1) at 1010.1 s = %+v, %v; want admitted", d, err)
	}
}
