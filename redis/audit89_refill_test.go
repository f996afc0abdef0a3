package redis

// Audit 89: the refill a Limiter announces (httplimit's RateLimit-Policy
// w comes from it), decide.go, refill: "how long an empty key takes to
// get Burst back as the server holds it: the full burst's debt as a cell
// stores it ..., drained at the rate, rounded up to the ms". For an exact
// limit that is the server's own ResetAfter after a full burst, and
// package limit's refill for the same policy.

import (
	"context"
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit89RedisFixedRefillLateExact (fixed: refill snaps an exact
// limit's quotient as package limit does): PerSecond(5, 161) counts in
// units of 200 per token, 1000 drained a second: a full burst is 32200
// units, back in exactly 32,200 ms (the server's ResetAfter says so, and
// package limit's refill); refill computes 32200/1000*1000 in float64,
// 32200.000000000004, and rounded it up to 32,201 ms. The same for 181 of
// the exact limits with Burst <= 400 among integer, 1000/k, k/60, k/3600,
// 1/k and k/7 rates (PerSecond(1000.0/7, 289): 2024 for 2023 ms).
// Package limit's refill snaps the quotient (common.SnapWhole) first.
// The w of RateLimit-Policy is whole seconds, rounded up, so the extra
// ms shows there only where the exact refill is a whole number of
// seconds, which divides exactly: not seen in the header.
func TestAudit89RedisFixedRefillLateExact(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for _, lim := range []Limit{PerSecond(5, 161), PerSecond(1000.0/7, 289), PerSecond(1000.0/9, 223), PerSecond(10, 327)} {
		t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_800_000_000_000)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a89rf:%v:%v", lim.Rate, lim.Burst), Limit: lim, Levels: 1, CellsPerLevel: 1, Clock: clk})
			d, err := l.AllowN(ctx, "k", lim.Burst)
			if err != nil || !d.Allowed {
				t.Fatalf("AllowN(Burst) = %+v, %v", d, err)
			}
			ll, err := limit.New(limit.Limit(lim.Rate), int(lim.Burst), limit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			pl := common.PolicyRefills(ll)[0].Refill
			got := common.PolicyRefills(l)[0].Refill
			if got != d.ResetAfter || got != pl {
				t.Errorf("refill %v; the server's ResetAfter after a full burst %v, package limit's refill %v", got, d.ResetAfter, pl)
			}
			// The key is indeed whole again at ResetAfter.
			clk.Advance(d.ResetAfter)
			if d, err := l.AllowN(ctx, "k", lim.Burst); err != nil || !d.Allowed {
				t.Fatalf("AllowN(Burst) at ResetAfter = %+v, %v", d, err)
			}
		})
	}
}
