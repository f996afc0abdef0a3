package redis

// Audit 96: DecideContext's limit.Decision at its edges (decide.go:
// "FailClosed's denial, and LocalFallback's for n above its Burst/N, say
// no retry time, RetryAfter 0 and NextAfter 0"; limit/decision.go:
// "NextAfter is the time until Remaining grows by one (the next whole
// token); 0 when the bucket is full (Remaining == Burst)").

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit96RedisDecideFixedFailClosedNeverNextAfter (audit 96; fixed at stop 59, the text
// below says what was wrong): FailClosed with
// the server killed (SIGKILL). A request above Burst is answered Never
// (it can never fit), but its NextAfter is computed from the Remaining 0
// that FailClosed's decision invents: 100 ms at 10/s, a promise of a
// token about a key the limiter knows nothing of. decide.go says
// FailClosed's denial says NextAfter 0 (audit 87 fixed the same for n
// within Burst: "a denial that is no decision ... knows nothing of the
// key: NextAfter stays 0"); httplimit would announce t=1 on that 429.
func TestAudit96RedisDecideFixedFailClosedNeverNextAfter(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a96fcn", Limit: PerSecond(10, 5), Clock: clk, Timeout: time.Second})
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	e.srv.kill()

	// Within Burst: no decision, NextAfter 0 (audit 87's fix holds).
	ld, err := l.DecideContext(ctx, "k", 1)
	if !errors.Is(err, ErrDegraded) || ld.Allowed || ld.Never || ld.RetryAfter != 0 || ld.NextAfter != 0 {
		t.Fatalf("FailClosed down, n=1: %+v, %v; want a denial with RetryAfter 0, NextAfter 0", ld, err)
	}
	// Above Burst: Never (limit.Decision: "set when n > burst"), and
	// still no knowledge of the key.
	ld, err = l.DecideContext(ctx, "k", 6)
	if !errors.Is(err, ErrDegraded) || ld.Allowed || !ld.Never || ld.RetryAfter != limit.InfDuration {
		t.Fatalf("FailClosed down, n=6 > Burst 5: %+v, %v; want Never", ld, err)
	}
	if ld.NextAfter != 0 {
		t.Errorf("FailClosed down, n=6 > Burst 5: NextAfter %v from the invented Remaining %d; want 0 (decide.go: FailClosed's denial says NextAfter 0)",
			ld.NextAfter, ld.Remaining)
	}
}

// TestAudit96RedisDecideFixedNextAfterAtWholeBurst (audit 96; fixed at stop 59, the text
// below says what was wrong): Burst 2.5 at 10/s
// (exact units: 250 of them, 1 a ms). One token taken, 70 ms later the
// debt is 0.3 tokens: Remaining 2.2, rounded down 2, the Decision's
// Burst (2.5 rounded down). A request above Burst then says Remaining 2
// == Burst 2 and NextAfter 30 ms (until the debt is 0), where
// limit.Decision says NextAfter is 0 when Remaining == Burst (no more
// whole token can come: httplimit leaves t out "when the bucket is full
// (no more quota can become available)" and would send r=2;t=1 with
// q=2). The same in the LocalFallback, whose Burst/N is 2.5 for Burst 5
// over 2 instances.
func TestAudit96RedisDecideFixedNextAfterAtWholeBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a96wb", Limit: PerSecond(10, 2.5), Clock: clk})
	ctx := context.Background()
	if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Fatalf("Allow: %+v, %v", d, err)
	}
	clk.Advance(70 * time.Millisecond)
	ld, err := l.DecideContext(ctx, "k", 3)
	if err != nil || ld.Allowed || !ld.Never || ld.Burst != 2 || ld.Remaining != 2 || ld.ResetAfter != 30*time.Millisecond {
		t.Fatalf("DecideContext(3): %+v, %v; want Never, Burst 2, Remaining 2, ResetAfter 30ms", ld, err)
	}
	if ld.NextAfter != 0 {
		t.Errorf("DecideContext(3) at Remaining == Burst == 2: NextAfter %v; want 0 (limit.Decision: 0 when Remaining == Burst)", ld.NextAfter)
	}
}

// The LocalFallback's decision: 10/s x 5 over 2 instances is 5/s x 2.5
// locally; one token taken with the server down, 140 ms later the
// fallback owes 0.3.
func TestAudit96RedisDecideFixedNextAfterAtWholeBurstFallback(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a96wbfb", Limit: PerSecond(10, 5), Clock: clk, Policy: LocalFallback, Instances: 2,
		Timeout: time.Second})
	e.srv.kill()
	ctx := context.Background()
	if d, err := l.Allow(ctx, "k"); !errors.Is(err, ErrDegraded) || !d.Allowed {
		t.Fatalf("fallback Allow: %+v, %v", d, err)
	}
	clk.Advance(140 * time.Millisecond)
	ld, err := l.DecideContext(ctx, "k", 6)
	if !errors.Is(err, ErrDegraded) || ld.Allowed || !ld.Never || ld.Burst != 2 || ld.Remaining != 2 || ld.ResetAfter != 60*time.Millisecond {
		t.Fatalf("fallback DecideContext(6): %+v, %v; want Never, Burst 2, Remaining 2, ResetAfter 60ms", ld, err)
	}
	if ld.NextAfter != 0 {
		t.Errorf("fallback DecideContext(6) at Remaining == Burst == 2: NextAfter %v; want 0 (limit.Decision: 0 when Remaining == Burst)", ld.NextAfter)
	}
}
