package redis

import (
	"context"
	"errors"
	"fmt"
	goredis "github.com/redis/go-redis/v9"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit17DenyCacheObserveBehind: the deny cache records the server's
// estimate as of its own time (the clock's high-water mark), but the
// server computed it at tm = max(clock, hw, stamps), which lies behind the
// high-water mark when the clock stepped back after a denial that wrote
// nothing. The cache then holds more debt than the server and denies a
// request the server admits, at a RetryAfter the server itself answered.
func TestAudit17FixedDenyCacheObserveBehind(t *testing.T) {
	for _, dc := range []uint32{0, 1024} {
		t.Run(map[uint32]string{0: "no cache", 1024: "deny cache"}[dc], func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(10_000)
			l := e.limiter(t, LimiterConfig{Name: "a17dc", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: dc})
			ctx := context.Background()
			if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
				t.Fatalf("AllowN(10) at 10s = %+v, %v", d, err)
			}
			clk.Set(10_500) // debt 5: 10 denied, nothing written
			if d, err := l.AllowN(ctx, "k", 10); err != nil || d.Allowed || d.RetryAfter != 500*time.Millisecond {
				t.Fatalf("AllowN(10) at 10.5s = %+v, %v; want denied, RetryAfter 500ms", d, err)
			}
			clk.Set(10_100) // back: the server's debt is 9 again (no elapsed time since the write at 10s)
			d, err := l.AllowN(ctx, "k", 2)
			if err != nil || d.Allowed || d.RetryAfter != 100*time.Millisecond {
				t.Fatalf("AllowN(2) at 10.1s = %+v, %v; want denied, RetryAfter 100ms", d, err)
			}
			clk.Advance(d.RetryAfter)
			if d2, err := l.AllowN(ctx, "k", 2); err != nil || !d2.Allowed {
				t.Fatalf("AllowN(2) at 10.1s + RetryAfter %v = %+v, %v; want admitted (RetryAfter honoured)", d.RetryAfter, d2, err)
			}
		})
	}
}

// TestAudit17FixedDenyCacheHourBehind: the same, an hour long. The
// clock went an hour past the key's last write (raising the deny
// cache's high-water mark), then back to 50 ms after the write: the
// server denies 1 token for 50 ms, but the cache takes the server's debt
// as of an hour later and denies the key locally for an hour (RetryAfter
// 1h), against "a wrong local denial ends within Burst/Rate"
// (docs/distributed.md, "Why the limit stays exact"). Failed before the
// fix (audit17); a regression test now.
func TestAudit17FixedDenyCacheHourBehind(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a17dch", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("AllowN(10) at 10s = %+v, %v", d, err)
	}
	clk.Set(3_610_000)
	if d, err := l.AllowN(ctx, "other", 1); err != nil || !d.Allowed {
		t.Fatalf("AllowN(other, 1) an hour later = %+v, %v", d, err)
	}
	clk.Set(10_050) // back: the server's debt for k is 9.5
	d, err := l.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 50*time.Millisecond {
		t.Fatalf("AllowN(1) at 10.05s = %+v, %v; want denied, RetryAfter 50ms", d, err)
	}
	clk.Set(10_100)
	if d2, err := l.AllowN(ctx, "k", 1); err != nil || !d2.Allowed {
		t.Fatalf("AllowN(1) at 10.1s, after the server's RetryAfter %v = %+v, %v; want admitted (the server admits it)", d.RetryAfter, d2, err)
	}
}

// TestAudit17FixedResetAfterZeroDebt: a key whose debt is 0 has ResetAfter 0
// ("the time until the key's debt drains to 0"); with the clock behind
// the string's creation the server answers the lag instead (later adds
// the lag to a wait of 0). Failed before the fix (audit17); a regression test now.
func TestAudit17FixedResetAfterZeroDebt(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a17z", Limit: PerSecond(10, 10), Clock: clk})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "other", 1); err != nil || !d.Allowed { // creates the string at 10s
		t.Fatalf("AllowN(other, 1) = %+v, %v", d, err)
	}
	clk.Set(9_000)
	for _, n := range []float64{0, 11} {
		if d, err := l.AllowN(ctx, "k", n); err != nil || d.Remaining != 10 || d.ResetAfter != 0 {
			t.Errorf("AllowN(k, %v) at 9s, k never written = %+v, %v; want Remaining 10, ResetAfter 0", n, d, err)
		}
	}
}

// TestAudit17ResetAfterZeroDebtFallback: the same in the local fallback
// (localtime.go later added the lag to a wait of 0). Failed before the
// fix (audit17); a regression test now.
func TestAudit17FixedResetAfterZeroDebtFallback(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { gc.Close() })
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a17zfb", Limit: PerSecond(10, 10), Policy: LocalFallback,
		ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "other", 1); !errors.Is(err, ErrDegraded) || !d.Allowed {
		t.Fatalf("AllowN(other, 1) = %+v, %v", d, err)
	}
	clk.Set(9_000)
	if d, err := l.AllowN(ctx, "k", 0); !errors.Is(err, ErrDegraded) || !d.Allowed || d.Remaining != 10 || d.ResetAfter != 0 {
		t.Errorf("AllowN(k, 0) at 9s, fallback, k never written = %+v, %v; want admitted, Remaining 10, ResetAfter 0", d, err)
	}
}

// TestAudit17DenyCacheOverBurst: with the deny cache, a request of more
// than Burst never reaches the server (the cache denies it as never
// fitting), and its Remaining and ResetAfter are the cache's, not the
// key's debt: a key the server holds at debt 5 reads Remaining 10 and
// ResetAfter 0. Failed before the fix (audit17; pre-existing, not clock
// related); a regression test now.
func TestAudit17FixedDenyCacheOverBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	for _, dc := range []uint32{0, 1024} {
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a17ob%d", dc), Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: dc})
		ctx := context.Background()
		if d, err := l.AllowN(ctx, "k", 5); err != nil || !d.Allowed {
			t.Fatalf("AllowN(5) = %+v, %v", d, err)
		}
		if d, err := l.AllowN(ctx, "k", 11); err != nil || d.Allowed || d.RetryAfter != -1 || d.Remaining != 5 || d.ResetAfter != 500*time.Millisecond {
			t.Errorf("DenyCacheCells %d: AllowN(11) at debt 5 = %+v, %v; want denied, RetryAfter -1, Remaining 5, ResetAfter 500ms", dc, d, err)
		}
	}
}
