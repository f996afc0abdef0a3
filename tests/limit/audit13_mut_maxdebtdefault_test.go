package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13DefaultMaxDebtRoomForRejectCost: the default MaxDebt is
// "2 x burst capped at 2^24, at least burst + RejectCost" (WithMaxDebt).
// With burst 5 and RejectCost 8 that is 13, so a denial of a key that
// used its burst leaves the whole penalty as debt: 5 + 8 = 13 tokens at
// 10/s, and the exact bucket's RetryAfter for one token is (13 - 4) / 10
// s = 900 ms (a MaxDebt of 10 would clamp it to 600 ms). Mutation audit13
// N24 (the "at least burst + RejectCost" dropped).
func TestAudit13DefaultMaxDebtRoomForRejectCost(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
		for _, c := range []struct {
			burst      int
			reject     float64
			maxDebt    float64
			retryAfter time.Duration
		}{
			{5, 8, 13, 900 * time.Millisecond},
			{5, 5, 10, 600 * time.Millisecond},
			{4, 1, 8, 200 * time.Millisecond},
		} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 30)
			l, err := limit.New(10, c.burst, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(eng), limit.WithRejectCost(c.reject))
			if err != nil {
				t.Fatal(err)
			}
			if l.MaxDebt() != c.maxDebt {
				t.Errorf("%v burst %d RejectCost %v: MaxDebt %v, want %v", eng, c.burst, c.reject, l.MaxDebt(), c.maxDebt)
			}
			if d := l.DecideN(clk.Now(), "k", c.burst); !d.Allowed {
				t.Fatalf("%v: burst denied", eng)
			}
			d := l.DecideN(clk.Now(), "k", 1)
			if d.Allowed || d.RetryAfter != c.retryAfter {
				t.Errorf("%v burst %d RejectCost %v: denial RetryAfter %v (Allowed %v), exact bucket %v", eng, c.burst, c.reject, d.RetryAfter, d.Allowed, c.retryAfter)
			}
		}
	}
}
