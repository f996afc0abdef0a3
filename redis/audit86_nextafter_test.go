package redis

import (
	"context"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit86FixedNextAfterLateExact: decide.go, DecideContext:
// "NextAfter is the time until Remaining grows by one (or the bucket is
// full), rounded up to the millisecond"; limiter.go, Limiter: for an
// exact configuration "every decision, RetryAfter and ResetAfter ... is
// exactly the rational token bucket's at millisecond resolution", the
// same as package limit's (whose Decision.NextAfter is exact there).
//
// 1000/h (a short fraction: unit 3600, 1 unit drains each ms), Burst 2,
// fake clock: DecideContext(k, 1) at t0, then again at t0+3599 ms. The
// key then holds 1 token + 1 unit of debt: Remaining is 3599/3600 token,
// and the next whole token comes back after 1 unit of drain, 1 ms.
// Package limit says 1ms; the Redis limiter says 2ms: toDecision
// recomputes the wait from the float64 Remaining (3599/3600 rounded) as
// (floor(r)+1 - r) / Rate x 1000, whose cancellation leaves an error far
// above the 4 ulps SnapWhole forgives (1.0000000000004 ms, ceiled to 2).
// The randomized TestAudit86ExactParity sees the same at 10/s, 3/s,
// 7/3 per s, Every(7ms), Every(13ms), 1/min with large bursts (a
// NextAfter 1 ms late in about a third of its DecideContext calls).
func TestAudit86FixedNextAfterLateExact(t *testing.T) {
	lim := PerSecond(1000.0/3600, 2)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	ll := limit.MustNew(limit.Limit(lim.Rate), 2, limit.WithClock(clk), limit.WithMaxDebt(2))
	forEachClient(t, func(t *testing.T, e *env) {
		c := sketchtest.NewFakeClock()
		c.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a86next", Limit: lim, Clock: c, CellsPerLevel: 64})
		ctx := context.Background()
		if d, err := l.DecideContext(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("first: %+v %v", d, err)
		}
		c.Advance(3599 * time.Millisecond)
		d, err := l.DecideContext(ctx, "k", 1)
		if err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("second: %+v %v", d, err)
		}
		if e.lib == "rueidis" {
			ll.DecideN(clk.Now(), "k", 1)
			clk.Advance(3599 * time.Millisecond)
			lw := ll.DecideN(clk.Now(), "k", 1)
			if lw.NextAfter != time.Millisecond {
				t.Fatalf("setup: package limit's NextAfter %v; want 1ms", lw.NextAfter)
			}
		}
		if d.NextAfter != time.Millisecond {
			t.Errorf("NextAfter %v; package limit and the rational bucket: 1ms (1 unit of 1/3600 token left to drain at 1 unit a ms)", d.NextAfter)
		}
		// The fact behind it: 1 ms later Remaining has grown by one.
		c.Advance(time.Millisecond)
		p, err := l.AllowN(ctx, "k", 0)
		if err != nil || p.Remaining != 1 {
			t.Errorf("1 ms later: Remaining %v (%v); want 1", p.Remaining, err)
		}
	})
}
