package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit77ResetAfterAsLeft: Decision.ResetAfter (decision.go, stop 48)
// "is the time until the key's debt, as this decision leaves it, drains to
// zero: an admitted request's cost is included, and an admitted Peek's
// too, as if it had been debited". At 1 token/s, burst 5: an admitted
// DecideN(2) and PeekN(2) on fresh keys both say 2s; the Peek equals the
// Decide that follows it; a denial reports the debt left (5s, no
// RejectCost), not debt + cost.
func TestAudit77ResetAfterAsLeft(t *testing.T) {
	for _, cu := range []bool{false, true} {
		t.Run(fmt.Sprintf("cu=%v", cu), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			l, err := limit.New(1, 5, limit.WithClock(clk), limit.WithConservativeUpdate(cu))
			if err != nil {
				t.Fatal(err)
			}
			now := l.Now()
			p := l.PeekN(now, "a", 2)
			d := l.DecideN(now, "a", 2)
			if !p.Allowed || !d.Allowed || p.ResetAfter != 2*time.Second || d.ResetAfter != 2*time.Second {
				t.Fatalf("fresh key, n=2: Peek %+v, Decide %+v; want both admitted with ResetAfter 2s", p, d)
			}
			p = l.PeekN(now, "a", 3)
			if !p.Allowed || p.ResetAfter != 5*time.Second {
				t.Fatalf("Peek n=3 at debt 2: %+v; want admitted, ResetAfter 5s (as if debited)", p)
			}
			d = l.DecideN(now, "a", 3)
			if !d.Allowed || d.ResetAfter != 5*time.Second {
				t.Fatalf("Decide n=3 at debt 2: %+v; want ResetAfter 5s", d)
			}
			p = l.PeekN(now, "a", 1)
			d = l.DecideN(now, "a", 1)
			if p.Allowed || d.Allowed || p.ResetAfter != 5*time.Second || d.ResetAfter != 5*time.Second {
				t.Fatalf("at debt 5 (full): Peek %+v, Decide %+v; want denied, ResetAfter 5s (the debt as the decision leaves it)", p, d)
			}
		})
	}
}
