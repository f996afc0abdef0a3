package redis

import (
	"context"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60FixedNextAfterLateExactRate: DecideContext (decide.go):
// "NextAfter is the time until Remaining grows by one (or the bucket is
// full), rounded up to the millisecond". For Every(13ms) (exact units:
// 13 units a token, 1 drained a ms) a token comes back exactly 13 ms
// after it was taken, and the server's own RetryAfter for 1 token says
// 13ms; NextAfter says 14ms (1 / (1000/13) x 1000 = 13.000000000000002 in
// float64, rounded up).
func TestAudit60FixedNextAfterLateExactRate(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a60na", Limit: PerSecond(1000.0/13, 2), Clock: clk, Timeout: 5 * time.Second})
	ctx := context.Background()
	var d limit.Decision
	for i := range 3 {
		var err error
		if d, err = l.DecideContext(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		if i < 2 != d.Allowed {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if d.RetryAfter != 13*time.Millisecond {
		t.Fatalf("the server's RetryAfter for 1 token: %v; want 13ms", d.RetryAfter)
	}
	clk.Advance(13 * time.Millisecond)
	d2, err := l.DecideContext(ctx, "probe", 1) // another key: k untouched
	if err != nil || !d2.Allowed {
		t.Fatal(d2, err)
	}
	if d2.NextAfter != 13*time.Millisecond {
		t.Errorf("Every(13ms): a key with 1 token taken: NextAfter %v; want 13ms (a token is back exactly 13 ms later; decide.go: \"the time until Remaining grows by one ..., rounded up to the millisecond\")", d2.NextAfter)
	}
	if d3, err := l.DecideContext(ctx, "k", 1); err != nil || !d3.Allowed {
		t.Fatalf("k 13 ms after its denial: %+v, %v", d3, err)
	}
}
