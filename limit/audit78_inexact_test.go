package limit_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Inexact tiers (a rate that is no R/k: 30/s, 7/s, 3/s, 13/s on a 10/s
// limiter) on both engines, reserving, deciding and peeking one key:
// "An inexact policy is never early against its own bucket, and its
// RetryAfter still predicts its own next decision to the millisecond"
// (doc.go). Checked: a reservation's Delay is never shorter than the
// exact bucket's for the same schedule of takes (the engine's debt is at
// least the exact one's, so the oracle's debt is a lower bound), an
// admission never happens where the exact bucket (on the lower-bound
// debt) denies, and a denial's RetryAfter is tight: PeekN 1 ms earlier
// denies and at RetryAfter admits.
func TestAudit78InexactTierNeverEarly(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, r := range []a78Pol{{30, 1, 20}, {7, 1, 10}, {3, 1, 5}, {13, 1, 15}} {
			t.Run(fmt.Sprintf("%v/%v", e, r), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				now := a78Start
				clk.Set(now)
				l := limit.MustNew(10, 20, a78Opts(clk, e, 2, limit.WithMaxDebt(80))...)
				tr, err := l.Tier("x", r.limit(), r.b)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(uint64(r.num), 78))
				k := &a78Key{d: new(big.Rat), at: now}
				for step := range 400 {
					now += int64(rng.IntN(int(a78Ceil(r.burstMs())) / 3))
					clk.Set(now)
					k.advance(now)
					tm := clk.Now()
					n := 1 + rng.IntN(r.b)
					switch rng.IntN(3) {
					case 0:
						res := tr.ReserveN(tm, "k", n)
						if !res.OK() {
							continue
						}
						after := a78add(k.d, a78mul(r.c(), n))
						exact := a78ms(max(a78Ceil(a78sub(after, r.burstMs())), 0))
						if res.DelayFrom(tm) < exact {
							t.Fatalf("step %d: ReserveN(%d) Delay %v; the exact bucket's is %v (early)", step, n, res.DelayFrom(tm), exact)
						}
						k.d = after
						// "Delay says when the requests may act (debt
						// drained back to the burst)": tight to the ms.
						if dl := res.DelayFrom(tm).Milliseconds(); dl > 0 && rng.IntN(2) == 0 {
							clk.Set(now + dl - 1)
							if tk := tr.TokensAt(clk.Now(), "k"); tk >= 0 {
								t.Fatalf("step %d: 1 ms before the Delay %d ms the tier's tokens are %v (debt already within the burst)", step, dl, tk)
							}
							now += dl
							clk.Set(now)
							k.advance(now)
							if tk := tr.TokensAt(clk.Now(), "k"); tk < -1e-9 {
								t.Fatalf("step %d: at the Delay %d ms the tier's tokens are %v (debt still above the burst)", step, dl, tk)
							}
						}
					default:
						d := tr.DecideN(tm, "k", n)
						w, after := a78Want(r, k.d, n)
						if d.Allowed && !w.Allowed {
							t.Fatalf("step %d: DecideN(%d) admitted where the exact bucket denies (debt >= %v ms)", step, n, k.d.FloatString(2))
						}
						if d.Allowed {
							k.d = after
							continue
						}
						if d.RetryAfter < w.RetryAfter {
							t.Fatalf("step %d: RetryAfter %v early against the exact bucket's %v", step, d.RetryAfter, w.RetryAfter)
						}
						// A t after the clock's reading counts as the
						// reading: move the clock to peek later.
						ra := d.RetryAfter.Milliseconds()
						if ra > 1 {
							clk.Set(now + ra - 1)
							if tr.PeekN(clk.Now(), "k", n).Allowed {
								t.Fatalf("step %d: PeekN 1 ms before RetryAfter %v ms admits", step, ra)
							}
						}
						now += ra
						clk.Set(now)
						k.advance(now)
						if !tr.PeekN(clk.Now(), "k", n).Allowed {
							t.Fatalf("step %d: PeekN at RetryAfter %v ms denies", step, ra)
						}
					}
				}
			})
		}
	}
}
