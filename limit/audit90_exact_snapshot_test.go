package limit_test

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit90ExactSnapshotRejectCostIsConfig: "The burst, RejectCost, the
// name and the mode are configuration, not state: the restoring
// process's apply" (doc.go, "Saving and restoring"). A snapshot taken
// from a limiter whose RejectCost is off the grid (Exact false) restores
// into one of the same engine, units and MaxDebt with an on-grid
// RejectCost (Exact true), and back: ReadFrom accepts it, Exact is the
// restoring limiter's, and the restored key (whose debt came from
// admissions only, so it is exact) then decides as the rational bucket
// with the restoring limiter's RejectCost, on both engines.
func TestAudit90ExactSnapshotRejectCostIsConfig(t *testing.T) {
	pol := a66Pol{10, 1, 20}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		pairs := [][2]float64{{1e-4, 0.5}, {0.5, 1e-4}, {1.0 / 3, 2}}
		if eng == limit.Buckets {
			// Buckets holds only RejectCosts of whole ticks (1,500 a token here).
			pairs = [][2]float64{{0.5, 2}, {2, 0.5}, {0.25, 3}}
		}
		for _, pair := range pairs {
			t.Run(fmt.Sprint(eng, pair), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(5_000_000)
				build := func(rc float64) *limit.Limiter {
					opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(4), limit.WithEngine(eng), limit.WithMaxDebt(40), limit.WithRejectCost(rc)}
					if eng == limit.CountMin {
						opts = append(opts, limit.WithSize(2, 256))
					} else {
						opts = append(opts, limit.WithCapacity(64, 0.01))
					}
					return limit.MustNew(pol.limit(), pol.b, opts...)
				}
				src, dst := build(pair[0]), build(pair[1])
				o := &a66Oracle{d: new(big.Rat), at: clk.NowMillis(), max: big.NewRat(4000, 1)}
				for _, n := range []int{7, 5, 3} {
					if !src.AllowN(src.Now(), "k", n) {
						t.Fatal("not admitted")
					}
					a90Decide(o, pol, n, new(big.Rat), true, -1)
					clk.Advance(37 * time.Millisecond)
					o.advance(clk.NowMillis())
				}
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				if _, err := dst.ReadFrom(&buf); err != nil {
					t.Fatalf("restore into RejectCost %v: %v", pair[1], err)
				}
				wantExact := build(pair[1]).Exact()
				if dst.Exact() != wantExact {
					t.Fatalf("restored limiter Exact %v, a fresh one of its configuration %v", dst.Exact(), wantExact)
				}
				rc := new(big.Rat).SetFloat64(pair[1])
				for i, n := range []int{20, 1, 21, 4, 1} {
					got := dst.DecideN(dst.Now(), "k", n)
					force := -1 // an inexact limiter's outcome is imposed on the bucket
					if !wantExact {
						force = 0
						if got.Allowed {
							force = 1
						}
					}
					want, fits := a90Decide(o, pol, n, rc, true, force)
					got.Policy = ""
					if wantExact && got != want || !wantExact && (got.Allowed && !fits || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter) {
						t.Fatalf("restored (RejectCost %v, Exact %v), op %d DecideN(%d):\n got %+v\nwant %+v", pair[1], wantExact, i, n, got, want)
					}
				}
			})
		}
	}
}
