package limit_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13TierRejectCostInPolicyTokens: "RejectCost is charged in the
// policy's tokens, at most MaxDebt" (docs/design.md, Tiers). A limiter
// of 10/s with RejectCost 1 and a tier (or SetLimit) of 5/s, burst 2: a
// key that used the tier's burst and is denied owes 2 + 1 tier tokens,
// so the denial's RetryAfter (which includes the penalty, DecideN) is
// the exact bucket's (3 - 1) / 5 s = 400 ms, and ResetAfter 600 ms.
// Mutation audit13 N21 (penalty priced in New's tokens) says 300 ms.
func TestAudit13TierRejectCostInPolicyTokens(t *testing.T) {
	type decider interface {
		DecideN(time.Time, string, int) limit.Decision
	}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, how := range []string{"tier", "setlimit"} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 33)
			l, err := limit.New(10, 2, limit.WithClock(clk), limit.WithSeed(11), limit.WithEngine(eng),
				limit.WithRejectCost(1), limit.WithMaxDebt(8))
			if err != nil {
				t.Fatal(err)
			}
			var d decider = l
			if how == "tier" {
				tr, err := l.Tier("slow", 5, 2)
				if err != nil {
					t.Fatal(err)
				}
				d = tr
			} else if err := l.SetLimit(5); err != nil {
				t.Fatal(err)
			}
			// The oracle: rate 5/s, burst 2, penalty 1 token.
			rate := big.NewRat(5, 1)
			msUntil := func(debt, target int64) time.Duration {
				ms := new(big.Rat).Quo(big.NewRat((debt-target)*1000, 1), rate)
				q := new(big.Int).Quo(ms.Num(), ms.Denom())
				if !ms.IsInt() {
					q.Add(q, big.NewInt(1))
				}
				return time.Duration(q.Int64()) * time.Millisecond
			}
			if dd := d.DecideN(clk.Now(), "k", 2); !dd.Allowed {
				t.Fatalf("%v %s: burst denied", eng, how)
			}
			dd := d.DecideN(clk.Now(), "k", 1)
			wantRetry, wantReset := msUntil(3, 1), msUntil(3, 0)
			if dd.Allowed || dd.RetryAfter != wantRetry || dd.ResetAfter != wantReset {
				t.Fatalf("%v %s: denial Allowed %v RetryAfter %v ResetAfter %v; exact bucket with the penalty in the policy's tokens: %v, %v",
					eng, how, dd.Allowed, dd.RetryAfter, dd.ResetAfter, wantRetry, wantReset)
			}
		}
	}
}
