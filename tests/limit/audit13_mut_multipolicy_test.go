package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13MultiDeniedPolicyExactFit: a denied Multi Decision names the
// window whose RetryAfter it reports. Window "slow" (10/s, burst 2) holds
// one token of debt and fits the next exactly (1 + 1 = 2: the exact
// bucket's RetryAfter is 0); window "fast" (1000/s, burst 1) holds one
// token and denies, freeing in 1 ms. The Decision is fast's: Policy
// "fast", Limit 1000, Burst 1, RetryAfter 1 ms. Mutation audit13 P4
// (state's fit test strict) gives slow a RetryAfter of 1 ms too, and the
// Decision names slow.
func TestAudit13MultiDeniedPolicyExactFit(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 29)
		slow, err := limit.New(10, 2, limit.WithClock(clk), limit.WithSeed(1), limit.WithEngine(eng), limit.WithName("slow"))
		if err != nil {
			t.Fatal(err)
		}
		fast, err := limit.New(1000, 1, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(eng), limit.WithName("fast"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := limit.NewMulti(slow, fast)
		if err != nil {
			t.Fatal(err)
		}
		if d := m.DecideKeys(clk.Now(), 1, "k"); !d.Allowed {
			t.Fatalf("%v: first request denied: %+v", eng, d)
		}
		d := m.DecideKeys(clk.Now(), 1, "k")
		if d.Allowed {
			t.Fatalf("%v: second request admitted past fast's burst", eng)
		}
		if d.Policy != "fast" || d.Limit != 1000 || d.Burst != 1 || d.RetryAfter != time.Millisecond {
			t.Errorf("%v: denial names %q (Limit %v, Burst %d) with RetryAfter %v; want fast's: 1000, 1, 1ms", eng, d.Policy, float64(d.Limit), d.Burst, d.RetryAfter)
		}
		// slow alone fits the request exactly now (Peek: no write).
		if p := slow.PeekN(clk.Now(), "k", 1); !p.Allowed || p.RetryAfter != 0 {
			t.Errorf("%v: slow alone: Allowed %v RetryAfter %v, want admitted", eng, p.Allowed, p.RetryAfter)
		}
	}
}
