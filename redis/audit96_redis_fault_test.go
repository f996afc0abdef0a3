package redis

// Audit 96: the fault policies with the deny cache on, the server killed
// (SIGKILL of the redis-server the test started), then restarted on its
// port (no persistence). policy.go: FailClosed denies, FailOpen admits,
// LocalFallback decides at Rate/N, Burst/N; AllowN: "When the server
// fails or times out, the Policy decides, and AllowN returns that
// decision with an error matching ErrDegraded that also wraps the
// cause"; the deny cache answers a denial locally with no round trip
// (LimiterConfig.DenyCacheCells), so a key it holds is denied with no
// error while the server is away; Degraded "true from a failed round
// trip until the next successful one"; Stats count each decision once.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit96RedisKillWithDenyCache(t *testing.T) {
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(pol.String(), func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_760_000_000_000)
			lim := PerSecond(10, 4)
			l := e.limiter(t, LimiterConfig{Name: "a96kill", Limit: lim, Clock: clk, Policy: pol, Instances: 2,
				DenyCacheCells: 1 << 10, Timeout: time.Second})
			ctx := context.Background()
			for i := range 4 {
				if d, err := l.Allow(ctx, "hot"); err != nil || !d.Allowed {
					t.Fatalf("admission %d: %+v, %v", i, d, err)
				}
			}
			d, err := l.AllowN(ctx, "hot", 2)
			if err != nil || d.Allowed || d.RetryAfter != 200*time.Millisecond || d.ResetAfter != 400*time.Millisecond {
				t.Fatalf("server's denial: %+v, %v; want RetryAfter 200ms, ResetAfter 400ms", d, err)
			}
			e.srv.kill()
			clk.Advance(50 * time.Millisecond)
			base := l.Stats()

			// The cached key: the cache's denial, no error, no round trip,
			// the server's waits counted on (one instance, exact units).
			d, err = l.AllowN(ctx, "hot", 2)
			if err != nil || d.Allowed || d.RetryAfter != 150*time.Millisecond || d.ResetAfter != 350*time.Millisecond ||
				d.Limit != lim || d.Remaining != 0.5 {
				t.Fatalf("cached key, server down: %+v, %v; want the cache's denial: RetryAfter 150ms, ResetAfter 350ms, Remaining 0.5", d, err)
			}
			if s := l.Stats(); s.CacheDenials != base.CacheDenials+1 || s.ServerCalls != base.ServerCalls || l.Degraded() {
				t.Fatalf("cached key, server down: Stats %+v (before %+v), Degraded %v; want one cache denial, no server call, not yet degraded",
					s, base, l.Degraded())
			}

			// A key the cache does not hold: the policy, ErrDegraded
			// wrapping the cause.
			d, err = l.Allow(ctx, "cold")
			if u, ok := err.(interface{ Unwrap() []error }); !errors.Is(err, ErrDegraded) || !ok || len(u.Unwrap()) != 2 || u.Unwrap()[1] == nil || !l.Degraded() {
				t.Fatalf("cold key, server down: %+v, %v, Degraded %v; want ErrDegraded wrapping the cause", d, err, l.Degraded())
			}
			switch pol {
			case FailClosed:
				if d.Allowed || d.RetryAfter != -1 || d.Remaining != 0 || d.Limit != lim {
					t.Fatalf("FailClosed: %+v", d)
				}
			case FailOpen:
				if !d.Allowed || d.RetryAfter != -1 || d.Remaining != lim.Burst || d.Limit != lim {
					t.Fatalf("FailOpen: %+v", d)
				}
			case LocalFallback:
				fb := Limit{Rate: 5, Burst: 2}
				if !d.Allowed || d.RetryAfter != -1 || d.Limit != fb || d.Remaining != 1 || d.ResetAfter != 200*time.Millisecond {
					t.Fatalf("LocalFallback: %+v; want the fallback's admission (Rate 5, Burst 2: Remaining 1, ResetAfter 200ms)", d)
				}
			}
			// The cached key is still the cache's while degraded.
			d, err = l.AllowN(ctx, "hot", 2)
			if err != nil || d.Allowed || d.RetryAfter != 150*time.Millisecond {
				t.Fatalf("cached key, degraded: %+v, %v; want the cache's denial", d, err)
			}
			if !l.Degraded() {
				t.Fatal("a cache denial ended the degraded state")
			}
			s := l.Stats()
			want := Stats{Decisions: base.Decisions + 3, ServerCalls: base.ServerCalls + 1, ServerErrors: base.ServerErrors + 1,
				CacheDenials: base.CacheDenials + 2, DegradedPeriod: base.DegradedPeriod + 1,
				PolicyAdmits: base.PolicyAdmits, PolicyDenials: base.PolicyDenials, Timeouts: base.Timeouts}
			if pol == FailClosed {
				want.PolicyDenials++
			} else {
				want.PolicyAdmits++
			}
			if s != want {
				t.Fatalf("Stats %+v; want %+v", s, want)
			}

			// Restarted without persistence: the debt is forgotten, the
			// library reloaded; the cache still denies until its own wait.
			e.srv.start()
			audit96WaitUp(t, l)
			clk.Advance(150*time.Millisecond - time.Millisecond)
			if d, err := l.AllowN(ctx, "hot", 2); err != nil || d.Allowed || d.RetryAfter != time.Millisecond {
				t.Fatalf("cached key 1 ms before its RetryAfter: %+v, %v; want the cache's denial, RetryAfter 1ms", d, err)
			}
			clk.Advance(time.Millisecond)
			d, err = l.AllowN(ctx, "hot", 2)
			if err != nil || !d.Allowed || l.Degraded() {
				t.Fatalf("cached key at RetryAfter, server back: %+v, %v, Degraded %v; want the server's admission", d, err, l.Degraded())
			}
			// The restarted server holds only that admission: 2 tokens.
			if d.Remaining != 2 || d.ResetAfter != 200*time.Millisecond {
				t.Fatalf("after the restart: %+v; want Remaining 2, ResetAfter 200ms (the old debt forgotten)", d)
			}
		})
	}
}

// audit96WaitUp waits (within 4 s) until 16 peeks in a row reach the
// restarted server: rueidis spreads calls over several connections, and
// the first call on each dropped one may fail (EOF) before it
// reconnects, after a call on another one succeeded.
func audit96WaitUp(t *testing.T, l *Limiter) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Second)
	for ok := 0; ok < 16; {
		if _, err := l.AllowN(context.Background(), "a96-probe", 0); err == nil {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			t.Fatal("no recovery within 4 s after the restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
