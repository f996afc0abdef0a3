package limit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// WaitN at the cap of a count-min limiter whose MaxDebt in units is not
// a float32 (held at the float32 above MaxDebt): refused with ErrMaxDebt
// before waiting, debiting nothing, and the retry at the denial's
// RetryAfter is admitted.
func TestAudit71WaitAtCap(t *testing.T) {
	for _, c := range []struct {
		R  float64
		md int
	}{{0.0944, 958687}, {0.0944, 196611}, {0.73, 1<<24 - 1}} {
		name := fmt.Sprintf("R %v MaxDebt %d", c.R, c.md)
		clk := limittest.NewFakeClock()
		clk.SetTime(time.Now().Truncate(time.Millisecond))
		l, err := limit.New(limit.Limit(c.R), c.md, limit.WithMaxDebt(float64(c.md)), limit.WithEngine(limit.CountMin), limit.WithSize(2, 64), limit.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		t0 := clk.Now()
		if !l.DecideN(t0, "k", c.md).Allowed {
			t.Fatal("full burst denied")
		}
		ra := l.DecideN(t0, "k", 1).RetryAfter
		if ra <= 0 {
			t.Fatalf("%s: RetryAfter %v at the cap", name, ra)
		}
		// At the cap there is no room to queue: WaitN is a *WaitError
		// (ErrMaxDebt) before waiting, having debited nothing.
		ctx, cancel := context.WithDeadline(context.Background(), t0.Add(ra))
		err = l.WaitN(ctx, "k", 1)
		var we *limit.WaitError
		if !errors.As(err, &we) || !errors.Is(err, limit.ErrMaxDebt) {
			t.Errorf("%s: WaitN at the cap: %v, want a *WaitError matching ErrMaxDebt", name, err)
		}
		if ra2 := l.DecideN(t0, "k", 1).RetryAfter; ra2 != ra {
			t.Errorf("%s: RetryAfter %v after the refused WaitN, %v before: it debited", name, ra2, ra)
		}
		clk.SetTime(t0.Add(ra))
		if !l.DecideN(t0.Add(ra), "k", 1).Allowed {
			t.Errorf("%s: the retry at RetryAfter %v denied", name, ra)
		}
		cancel()
	}
}
