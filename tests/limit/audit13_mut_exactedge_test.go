package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13ExactAtTwoTo24Units: the count-min is exact when MaxDebt
// drains within 2^24 units (package doc, "Exactness"; internal/units:
// MaxDebt x unit <= 2^24), the boundary included: 1000/s counts in units
// of 1 token (1 ms), 500/s in units of 1 ms = half a token, so MaxDebt
// 2^24 and 2^23 tokens respectively are exactly 2^24 units. Mutation
// audit13 M10 (< in place of <=) reports them inexact. The decisions at
// the boundary are the exact bucket's: a full burst from empty, then a
// denial whose RetryAfter is the exact one.
func TestAudit13ExactAtTwoTo24Units(t *testing.T) {
	for _, c := range []struct {
		lim     limit.Limit
		burst   int
		maxDebt float64
		tokMs   int64 // ms per token
	}{
		{1000, 1 << 23, 1 << 24, 1},
		{1000, 1 << 20, 1 << 24, 1},
		{500, 1 << 22, 1 << 23, 2},
	} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 30)
		l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithSeed(3),
			limit.WithMaxDebt(c.maxDebt), limit.WithEngine(limit.CountMin), limit.WithSize(2, 1024))
		if err != nil {
			t.Fatal(err)
		}
		if !l.Exact() {
			t.Errorf("New(%v, %d, WithMaxDebt(%v)) on CountMin: Exact false; MaxDebt is exactly 2^24 units", float64(c.lim), c.burst, c.maxDebt)
		}
		d := l.DecideN(clk.Now(), "k", c.burst)
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("full burst from empty: %+v", d)
		}
		want := time.Duration(c.tokMs) * time.Millisecond // one token drains
		if d.ResetAfter != time.Duration(int64(c.burst)*c.tokMs)*time.Millisecond {
			t.Fatalf("ResetAfter %v, want %v", d.ResetAfter, time.Duration(int64(c.burst)*c.tokMs)*time.Millisecond)
		}
		d = l.DecideN(clk.Now(), "k", 1)
		if d.Allowed || d.RetryAfter != want {
			t.Fatalf("second request: Allowed %v RetryAfter %v, want denied with %v", d.Allowed, d.RetryAfter, want)
		}
	}
}
