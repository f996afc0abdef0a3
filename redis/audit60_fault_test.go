package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60KillRestartDecisionFields: the server killed with SIGKILL
// and restarted (no persistence), for each Policy (rueidis): the
// Decision fields while it is down are the ones Decision's and
// DecideContext's docs give (FailClosed: denied, RetryAfter -1,
// DecideContext RetryAfter 0 and not Never; FailOpen: admitted with
// Remaining Burst; LocalFallback with Instances 2: the Rate/2, Burst/2
// limiter with exact waits, an n above Burst/2 within Burst denied with
// RetryAfter -1 and the limiter's Limit, an n above Burst Never), every
// error matching ErrDegraded and wrapping the cause; a canceled context
// with the server up is the Policy's too; after the restart the next
// successful call (retried: the first may meet a dead connection) makes
// Degraded false, and k is the server's again ( a fresh key's debt: the restart
// lost it), with one degraded period counted per outage.
func TestAudit60KillRestartDecisionFields(t *testing.T) {
	// rueidis only: go-redis's pool backs off dialling after the failed
	// dials (about 5 s a policy), which the 20 s budget cannot take.
	func(t *testing.T, e *env) {
		ctx := context.Background()
		lim := PerSecond(2, 10) // exact: 500 units a token... tokens of 500 ms
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l := e.limiter(t, LimiterConfig{Name: "a60f" + pol.String(), Limit: lim, Clock: clk, Policy: pol,
				Instances: 2, Timeout: 2 * time.Second, DenyCacheCells: 256})
			for i := range 10 {
				if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed || d.Remaining != float64(9-i) {
					t.Fatalf("%v: admission %d: %+v %v", pol, i, d, err)
				}
			}
			// A canceled context with the server up.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			d, err := l.Allow(cctx, "fresh")
			if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: canceled context: %+v, %v; want ErrDegraded wrapping context.Canceled", pol, d, err)
			}
			if pol == FailClosed && (d.Allowed || d.RetryAfter != -1) || pol != FailClosed && !d.Allowed {
				t.Errorf("%v: canceled context: %+v", pol, d)
			}
			if _, err := l.Allow(ctx, "fresh2"); err != nil || l.Degraded() {
				t.Fatalf("%v: after the canceled call: %v, Degraded %v", pol, err, l.Degraded())
			}
			periods := l.Stats().DegradedPeriod

			e.srv.kill()
			d, err = l.AllowN(ctx, "k2", 1)
			if !errors.Is(err, ErrDegraded) || !l.Degraded() {
				t.Fatalf("%v: server down: %+v, %v, Degraded %v", pol, d, err, l.Degraded())
			}
			ld, lerr := l.DecideContext(ctx, "k2", 1)
			if !errors.Is(lerr, ErrDegraded) {
				t.Fatalf("%v: DecideContext down: %v", pol, lerr)
			}
			switch pol {
			case FailClosed:
				if d.Allowed || d.RetryAfter != -1 || d.Remaining != 0 || d.Limit != lim {
					t.Errorf("FailClosed down: %+v; want denied, RetryAfter -1, Remaining 0, the limiter's Limit", d)
				}
				if ld.Allowed || ld.Never || ld.RetryAfter != 0 {
					t.Errorf("FailClosed DecideContext down: %+v; want denied, not Never, RetryAfter 0", ld)
				}
			case FailOpen:
				if !d.Allowed || d.RetryAfter != -1 || d.Remaining != lim.Burst {
					t.Errorf("FailOpen down: %+v; want admitted, RetryAfter -1, Remaining Burst", d)
				}
				if !ld.Allowed {
					t.Errorf("FailOpen DecideContext down: %+v", ld)
				}
			case LocalFallback:
				fb := Limit{Rate: 1, Burst: 5}
				if !d.Allowed || d.Limit != fb || d.Remaining != 4 || d.ResetAfter != time.Second {
					t.Errorf("LocalFallback down, first: %+v; want admitted, Limit %v, Remaining 4, ResetAfter 1s", d, fb)
				}
				// ld took one more: 3 left; take them, then the denial.
				for i := range 3 {
					if d, err := l.Allow(ctx, "k2"); !d.Allowed || !errors.Is(err, ErrDegraded) {
						t.Fatalf("LocalFallback admission %d: %+v %v", i, d, err)
					}
				}
				d, _ = l.Allow(ctx, "k2")
				if d.Allowed || d.RetryAfter != time.Second || d.ResetAfter != 5*time.Second || d.Remaining != 0 || d.Limit != fb {
					t.Errorf("LocalFallback denial: %+v; want RetryAfter 1s, ResetAfter 5s, Remaining 0, Limit %v", d, fb)
				}
				d, _ = l.AllowN(ctx, "k3", 7)
				if d.Allowed || d.RetryAfter != -1 || d.Limit != lim {
					t.Errorf("LocalFallback n=7 (above Burst/2, within Burst): %+v; want denied, RetryAfter -1, the limiter's Limit", d)
				}
				if ld, _ := l.DecideContext(ctx, "k3", 7); ld.Allowed || ld.Never || ld.RetryAfter != 0 {
					t.Errorf("LocalFallback DecideContext n=7: %+v; want not Never, RetryAfter 0", ld)
				}
				if ld, _ := l.DecideContext(ctx, "k3", 11); ld.Allowed || !ld.Never || ld.RetryAfter != limit.InfDuration {
					t.Errorf("LocalFallback DecideContext n=11 (above Burst): %+v; want Never", ld)
				}
				clk.Advance(time.Second)
				if d, _ := l.Allow(ctx, "k2"); !d.Allowed {
					t.Errorf("LocalFallback: 1 s after the denial (its RetryAfter): %+v", d)
				}
			}
			if got := l.Stats().DegradedPeriod; got != periods+1 {
				t.Errorf("%v: DegradedPeriod %d -> %d; want one more for the outage", pol, periods, got)
			}
			e.srv.start()
			// Recovery: a call succeeds again (the first may still meet
			// a dead connection or the client's dial backoff).
			deadline := time.Now().Add(8 * time.Second)
			for {
				if _, err := l.Allow(ctx, "probe"); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v: no recovery after the restart: %+v", pol, l.Stats())
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The server lost k's debt: the next request the server
			// answers (another stale connection of the pool may still
			// fail one: a failed call writes nothing there) admits it.
			for {
				if d, err = l.Allow(ctx, "k"); err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil || !d.Allowed || l.Degraded() || d.Remaining != 9 {
				t.Fatalf("%v: after the restart: %+v, %v, Degraded %v; want the server's admission of a fresh key", pol, d, err, l.Degraded())
			}
		}
	}(t, newEnv(t, "rueidis", "standalone"))
}

// TestAudit60ExpiredContext: a context whose deadline has passed, with
// the server up, is a failed round trip decided by the Policy: the error
// matches ErrDegraded and context.DeadlineExceeded, Stats counts it as a
// server error and a Timeout, the key's debt is not written (FailOpen's
// admission is the policy's), and the deny cache's stripe counters stay
// balanced (a later denial is still learned and answered locally).
func TestAudit60ExpiredContext(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a60x", Limit: PerSecond(2, 3), Clock: clk, Policy: FailOpen,
		DenyCacheCells: 256, PreCheck: true, Timeout: 2 * time.Second})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for range 5 {
		d, err := l.Allow(ctx, "k")
		if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.DeadlineExceeded) || !d.Allowed {
			t.Fatalf("expired context: %+v, %v", d, err)
		}
	}
	if s := l.Stats(); s.ServerErrors != 5 || s.Timeouts != 5 || s.PolicyAdmits != 5 || s.DegradedPeriod != 1 {
		t.Errorf("stats %+v; want 5 server errors, 5 timeouts, 5 policy admits, 1 degraded period", s)
	}
	bg := context.Background()
	for i := range 3 {
		if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || d.Remaining != float64(2-i) {
			t.Fatalf("after: admission %d: %+v, %v (the expired calls wrote nothing)", i, d, err)
		}
	}
	for i := range 2 {
		if d, err := l.Allow(bg, "k"); err != nil || d.Allowed || d.RetryAfter != 500*time.Millisecond {
			t.Fatalf("denial %d: %+v, %v", i, d, err)
		}
	}
	if s := l.Stats(); s.CacheDenials < 1 {
		t.Errorf("no cache denial after the expired calls: %+v", s)
	}
	for i := range denyStripes {
		if n := l.cache.pending[i].Load(); n != 0 {
			t.Fatalf("stripe %d: %d calls in flight", i, n)
		}
	}
}
