package limit_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit51SetLimitRefusedMidFlight: SetLimit and SetBurst with an
// invalid value (zero, negative, NaN, Inf, tiny, huge, a burst of 0 or
// past MaxDebt) on a limiter whose key is in debt with a reservation
// outstanding, across a clock that stepped back: each is refused
// (tier.go: "nothing changes then"), the next decisions are those of
// the unchanged policy, and the reservation still cancels exactly.
func TestAudit51SetLimitRefusedMidFlight(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(9), limit.WithMaxDebt(40))
		if !l.AllowN(clk.Now(), "k", 15) {
			t.Fatal("15 denied")
		}
		r := l.ReserveN(clk.Now(), "k", 10) // 5 past the burst: acts in 500 ms
		if !r.OK() || r.Delay() != 500*time.Millisecond {
			t.Fatalf("%v: reserve ok %v delay %v", eng, r.OK(), r.Delay())
		}
		clk.Advance(200 * time.Millisecond)
		l.Peek("other")                      // the limiter uses +200 ms
		clk.Set(clk.NowMillis() - 3_600_000) // an hour back: decisions stay at +200 ms
		before := l.PeekN(clk.Now(), "k", 3)
		for _, lim := range []limit.Limit{0, -1, limit.Limit(math.NaN()), limit.Inf, limit.Limit(math.Inf(-1)), 1e-300, 1e23} {
			err := l.SetLimit(lim)
			if err == nil {
				t.Errorf("%v: SetLimit(%v) accepted", eng, lim)
				continue
			}
			var me *limit.MaxDebtError
			if !errors.Is(err, sketch.ErrInvalidConfig) && !errors.As(err, &me) {
				t.Errorf("%v: SetLimit(%v): %v is neither a ConfigError nor a MaxDebtError", eng, lim, err)
			}
		}
		for _, b := range []int{0, -3, 41, 1 << 25} {
			if err := l.SetBurst(b); err == nil {
				t.Errorf("%v: SetBurst(%d) accepted", eng, b)
			}
		}
		if l.Limit() != 10 || l.Burst() != 20 || !l.Exact() {
			t.Fatalf("%v: policy changed: %v/%d exact %v", eng, l.Limit(), l.Burst(), l.Exact())
		}
		if after := l.PeekN(clk.Now(), "k", 3); after != before {
			t.Errorf("%v: a peek changed across refused SetLimit/SetBurst: %+v then %+v", eng, before, after)
		}
		r.Cancel()
		// 15 tokens at T, drained 200 ms: 13 owed, 7 left
		if got := l.Tokens("k"); math.Abs(got-7) > 1e-9 {
			t.Errorf("%v: after Cancel tokens %.9f, want 7", eng, got)
		}
	}
}

// TestAudit51SetLimitThenCancelAcrossSteps: a reservation taken under one
// policy, SetLimit/SetBurst to another (the debt is time: doc.go "A key
// in debt keeps its debt as time"), clock back then forward, then
// Cancel: the key reads exactly as if never reserved, in the new
// policy's tokens, and the Decision's RetryAfter and ResetAfter are the
// new policy's exact bucket from the debt as time.
func TestAudit51SetLimitThenCancelAcrossSteps(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(10), limit.WithMaxDebt(80))
		l.AllowN(clk.Now(), "k", 20)        // 2000 ms of debt
		r := l.ReserveN(clk.Now(), "k", 20) // 4000 ms, acts at +2000 ms
		if d := r.Delay(); d != 2*time.Second {
			t.Fatalf("%v: delay %v ok %v tokens %v maxdebt %v", eng, d, r.OK(), l.Tokens("k"), l.MaxDebt())
		}
		if err := l.SetLimit(5); err != nil { // 200 ms a token; burst 20 = 4000 ms
			t.Fatal(err)
		}
		if err := l.SetBurst(8); err != nil { // burst 1600 ms
			t.Fatal(err)
		}
		clk.Advance(700 * time.Millisecond)
		l.Peek("other")                       // the limiter uses +700 ms
		clk.Set(clk.NowMillis() - 86_400_000) // a day back
		// debt 3300 ms at the latest time used (+700 ms)
		d := l.DecideN(clk.Now(), "k", 1)
		lag := 86_400_000 * time.Millisecond
		if d.Allowed || d.RetryAfter != lag+(3300+200-1600)*time.Millisecond || d.ResetAfter != lag+3300*time.Millisecond {
			t.Errorf("%v: before cancel %+v; want denied, RetryAfter lag+1.9s, ResetAfter lag+3.3s", eng, d)
		}
		clk.Set(clk.NowMillis() + 86_400_000 + 100) // forward: +800 ms
		r.Cancel()
		// never reserved: 2000 ms at 0, drained 800: 1200 ms = 6 tokens of 200 ms owed; burst 8 -> 2 left
		if got := l.Tokens("k"); math.Abs(got-2) > 1e-9 {
			t.Errorf("%v: after SetLimit, steps and Cancel tokens %.9f want 2", eng, got)
		}
		d = l.DecideN(clk.Now(), "k", 3)
		if d.Allowed || d.RetryAfter != 200*time.Millisecond || d.ResetAfter != 1200*time.Millisecond || d.Remaining != 2 {
			t.Errorf("%v: after cancel %+v; want denied, RetryAfter 200ms, ResetAfter 1.2s, Remaining 2", eng, d)
		}
	}
}
