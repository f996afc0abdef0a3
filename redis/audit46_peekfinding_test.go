package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// TestAudit46FixedPeekMakesRetryAfterEarly: redis_rate's peek idiom,
// AllowN(ctx, key, 0) (its TestAllowN_IncrementZero), takes nothing and
// changes nothing there. Here an n = 0 AllowN is TryUpdate(key, 0,
// Burst): the server function commits delta 0, re-stamping every cell at
// roundUp(float32) of its decayed value. For a limit counting tokens
// (not exact units) each peek at a new millisecond can add up to one
// float32 step of debt, and those steps add up, so a client that polls
// with n = 0 while it waits finds the RetryAfter it was given early:
// the same request is denied at it.
//
// limiter.go, Decision.RetryAfter: "When denied: the exact wait, rounded
// up to the ms, after which the same request fits if nothing else is
// admitted meanwhile (never early)". A peek admits nothing (it takes 0
// tokens). docs/distributed.md ("Sweep slack") adds 1 ms per re-stamping
// only for the server's rebases, not for these.
func TestAudit46FixedPeekMakesRetryAfterEarly(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	cases := []struct {
		lim   Limit
		every time.Duration
	}{
		// token counting: pi is no short fraction
		{PerSecond(math.Pi/10, 1000), time.Millisecond},
		{PerSecond(math.Pi/10, 1000), 10 * time.Millisecond},
		{PerSecond(math.Pi/10, 1000), 100 * time.Millisecond},
		// token counting: 7/s in ms units would need 1000 x 1e5 > 2^24
		{PerSecond(7, 100_000), 10 * time.Millisecond},
	}
	for ci, c := range cases {
		lim, every := c.lim, c.every
		t.Run(fmt.Sprintf("rate=%.4g,burst=%v,peek every %v", lim.Rate, lim.Burst, every), func(t *testing.T) {
			l, clk := a46Limiter(t, e, fmt.Sprint("a46peek", ci), lim, 0)
			if d, err := l.AllowN(ctx, "k", lim.Burst-0.5); err != nil || !d.Allowed {
				t.Fatalf("AllowN(Burst-0.5) = %+v, %v", d, err)
			}
			d, err := l.AllowN(ctx, "k", 1)
			if err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("AllowN(1) = %+v, %v; want a denial with a wait", d, err)
			}
			R := d.RetryAfter
			peeks := 0
			for waited := every; waited < R; waited += every {
				clk.Advance(every)
				if _, err := l.AllowN(ctx, "k", 0); err != nil {
					t.Fatal(err)
				}
				peeks++
			}
			clk.Set(clk.NowMillis() + (R - time.Duration(peeks)*every).Milliseconds())
			d2, err := l.AllowN(ctx, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d2.Allowed {
				t.Errorf("denied AllowN(1) with RetryAfter %v; after %d n=0 peeks (one every %v) the retry at exactly %v is denied again: Remaining %.9f, RetryAfter %v more. "+
					"Want admitted (Decision.RetryAfter: \"after which the same request fits if nothing else is admitted meanwhile (never early)\"; redis_rate's n=0 is a read)",
					R, peeks, every, R, d2.Remaining, d2.RetryAfter)
			}
		})
	}
}

// TestAudit46PeekExactUnitsNoDrift: for exact units (10/s burst 10,
// 100/h) the same polling leaves RetryAfter exact: whole units round
// nothing.
func TestAudit46PeekExactUnitsNoDrift(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, lim := range []Limit{PerSecond(10, 10), PerSecond(100.0/3600, 100)} {
		l, clk := a46Limiter(t, e, fmt.Sprint("a46peekx", i), lim, 0)
		l.AllowN(ctx, "k", lim.Burst-0.5)
		d, _ := l.AllowN(ctx, "k", 1)
		if d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("%+v: AllowN(1) = %+v", lim, d)
		}
		R := d.RetryAfter
		for w := time.Millisecond; w < R && w < 5*time.Second; w += time.Millisecond {
			clk.Advance(time.Millisecond)
			l.AllowN(ctx, "k", 0)
		}
		clk.Set(clk.NowMillis() + (R - min(R-time.Millisecond, 5*time.Second-time.Millisecond)).Milliseconds())
		if d2, _ := l.AllowN(ctx, "k", 1); !d2.Allowed {
			t.Errorf("%+v: RetryAfter %v, denied at it after peeks: %+v", lim, R, d2)
		}
	}
}
