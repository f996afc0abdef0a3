package limit_test

// audit22: claims of the limit documentation checked with short
// deterministic tests.

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// audit22 found Decision.NextAfter's doc saying "It is at most
// RetryAfter" without restriction, false on every admission that leaves
// the key below its burst (RetryAfter 0, NextAfter > 0); the doc now says
// it for denials, which is what httplimit relies on.

// TestAudit22NextAfterAtMostRetryAfterOnDenials: what the inequality is
// for, on denials (the Limiter's, a Tier's and a Multi's), at n = 1 and
// n > 1, with and without RejectCost: NextAfter <= RetryAfter, NextAfter
// > 0 (the bucket is not full), and Never has RetryAfter InfDuration.
func TestAudit22NextAfterAtMostRetryAfterOnDenials(t *testing.T) {
	for _, e := range engines {
		for _, rc := range []float64{0, 3} {
			l, clk := newFake(t, 10, 10, limit.WithEngine(e), limit.WithRejectCost(rc), limit.WithMaxDebt(40))
			tier, err := l.Tier("slow", 5, 5)
			if err != nil {
				t.Fatal(err)
			}
			l2, _ := newFake(t, 100, 20, limit.WithEngine(e), limit.WithClock(clk))
			m, err := limit.NewMulti(l2, l)
			if err != nil {
				t.Fatal(err)
			}
			if !l.AllowN(clk.Now(), "k", 10) {
				t.Fatal("burst denied")
			}
			clk.Advance(30 * time.Millisecond)
			check := func(what string, d limit.Decision) {
				t.Helper()
				if d.Allowed {
					t.Fatalf("%v rc=%v %s admitted: %+v", e, rc, what, d)
				}
				if d.Never {
					if d.RetryAfter != limit.InfDuration {
						t.Errorf("%v rc=%v %s: Never with RetryAfter %v", e, rc, what, d.RetryAfter)
					}
					return
				}
				if d.NextAfter <= 0 || d.NextAfter > d.RetryAfter {
					t.Errorf("%v rc=%v %s: NextAfter %v, RetryAfter %v", e, rc, what, d.NextAfter, d.RetryAfter)
				}
			}
			for _, n := range []int{1, 4, 11} {
				check("Limiter", l.DecideN(clk.Now(), "k", n))
				check("Tier", tier.DecideN(clk.Now(), "k", n))
				check("Multi", m.DecideKeys(clk.Now(), n, "k"))
			}
		}
	}
}
