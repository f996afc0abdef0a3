package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit89ReserveTierQueuesToMaxDebt: "Reservations of any policy
// queue up to the limiter's MaxDebt" (doc.go), and Tier.MaxDebt is "the
// most debt a key can carry in the tier's tokens: the limiter's MaxDebt
// priced at the tier's cost" (tier.go). From an empty key, within one
// millisecond, a Tier's ReserveN is OK exactly while the tokens reserved
// so far stay within Tier.MaxDebt, each OK one's Delay is the time its
// queue drains back to the tier's burst at the tier's cost (never
// shorter than the exact bucket's), and a refused one debits nothing.
// Exact and inexact tiers (rounded costs), both engines.
func TestAudit89ReserveTierQueuesToMaxDebt(t *testing.T) {
	cases := []struct {
		lim   limit.Limit
		burst int
		tier  limit.Limit
		tb    int
		opts  []limit.Option
	}{
		{10, 20, 3, 6, []limit.Option{limit.WithEngine(limit.Buckets)}},
		{10, 20, 3, 6, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{10, 20, 5, 10, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithMaxDebt(45)}},
		{10, 20, 2.5, 7, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(37)}},
		{limit.Limit(math.Pi), 20, limit.Limit(math.E), 9, []limit.Option{limit.WithMaxDebt(50)}},
		{limit.Every(3 * time.Second), 4, limit.Every(7 * time.Second), 2, []limit.Option{limit.WithMaxDebt(9)}},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%d-%v-tier%v", ci, c.lim, c.tier), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(89, uint64(ci)))
		runs:
			for run := 0; run < 8; run++ {
				clk := limittest.NewFakeClock()
				clk.Set(9_000_000)
				l, err := limit.New(c.lim, c.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(run))}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				tr, err := l.Tier("t", c.tier, c.tb)
				if err != nil {
					t.Fatal(err)
				}
				maxTok := tr.MaxDebt()
				costMs := float64(time.Second) / float64(c.tier) / float64(time.Millisecond) // the exact ms a tier token drains in
				now := clk.Now()
				sum := 0
				for range 12 {
					n := 1 + rng.IntN(c.tb)
					before := tr.TokensAt(now, "k")
					r := tr.ReserveN(now, "k", n)
					fits := float64(sum+n) <= maxTok
					if math.Abs(float64(sum+n)-maxTok) < 1e-9*maxTok {
						if !tr.Exact() {
							continue runs // too close to MaxDebt to tell in float64
						}
						fits = true // exactly MaxDebt is within it
					}
					if r.OK() != fits {
						t.Fatalf("run %d: ReserveN(%d) after %d reserved: OK %v, want %v (Tier.MaxDebt %v)", run, n, sum, r.OK(), fits, maxTok)
					}
					if !r.OK() {
						if after := tr.TokensAt(now, "k"); after != before {
							t.Fatalf("run %d: a refused ReserveN(%d) debited: %v -> %v", run, n, before, after)
						}
						continue
					}
					sum += n
					// the queue drains back to the burst: (sum - burst) tokens
					exact := time.Duration(math.Ceil(float64(sum-c.tb)*costMs-1e-9)) * time.Millisecond
					if sum <= c.tb {
						exact = 0
					}
					if d := r.Delay(); d < exact || (tr.Exact() && d != exact) {
						t.Fatalf("run %d: ReserveN(%d) with %d reserved: Delay %v, exact bucket %v (Tier.Exact %v)", run, n, sum, d, exact, tr.Exact())
					}
				}
			}
		})
	}
}
