package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// TestAudit45XRateTierDifferential: an exact Tier (r, b) decides as
// x/time/rate's NewLimiter(r, b): "then its decisions and durations are
// the rational bucket (r, b)'s, as New's are" (limit/doc.go, "Exactness
// of a policy"). Random AllowN/ReserveN/TokensAt on one key.
func TestAudit45XRateTierDifferential(t *testing.T) {
	cases := []struct {
		R  limit.Limit
		B  int
		md float64
		r  limit.Limit
		b  int
	}{
		{10, 20, 80, 2.5, 20},
		{10, 20, 80, 5, 3},
		{30, 10, 120, 10, 7},
		{1000, 100, 2000, 100, 20},
	}
	for ci, c := range cases {
		for _, eng := range a45Engines {
			t.Run(fmt.Sprintf("%v-%v/%d/%v", float64(c.R), float64(c.r), c.b, eng), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.SetTime(a45T0)
				o := []limit.Option{limit.WithClock(clk), limit.WithSeed(7), limit.WithEngine(eng), limit.WithMaxDebt(c.md)}
				if eng == limit.CountMin {
					o = append(o, limit.WithPeriod(10000*time.Hour))
				}
				l, err := limit.New(c.R, c.B, o...)
				if err != nil {
					t.Fatal(err)
				}
				tr, err := l.Tier("t", c.r, c.b)
				if err != nil {
					t.Fatal(err)
				}
				if !tr.Exact() {
					t.Skip("tier not exact")
				}
				x := rate.NewLimiter(rate.Limit(c.r), c.b)
				maxDebtTier := c.md * float64(c.r) / float64(c.R)
				tok := time.Duration(float64(time.Second) / float64(c.r))
				rng := rand.New(rand.NewPCG(99, uint64(ci)))
				bad, admitted := 0, 0
				for op := range 10000 {
					if rng.IntN(3) > 0 {
						clk.Advance(time.Duration(rng.Float64() * 2 * float64(tok)).Truncate(time.Millisecond))
					}
					now := clk.Now()
					xt := x.TokensAt(now)
					if lt := tr.TokensAt(now, "k"); math.Abs(lt-xt) > 1e-6 {
						bad++
						t.Errorf("op %d at +%v: TokensAt %v, x/time/rate %v", op, now.Sub(a45T0), lt, xt)
					}
					n := 1 + rng.IntN(c.b)
					if math.Abs(xt-float64(n)) < 1e-9 || math.Abs(float64(c.b)-xt+float64(n)-maxDebtTier) < 1e-6 {
						if tr.AllowN(now, "k", n) {
							x.ReserveN(now, n)
						}
						continue
					}
					if rng.IntN(12) == 0 {
						r := tr.ReserveN(now, "k", n)
						if float64(c.b)-xt+float64(n) > maxDebtTier {
							if r.OK() {
								bad++
								t.Errorf("op %d: tier ReserveN OK past MaxDebt", op)
							}
							continue
						}
						xr := x.ReserveN(now, n)
						if !r.OK() {
							bad++
							t.Errorf("op %d: tier ReserveN(%d) not OK (x tokens %v, MaxDebt %v)", op, n, xt, maxDebtTier)
						} else if ld, xd := r.DelayFrom(now), xr.DelayFrom(now); ld < xd || ld-xd > time.Millisecond {
							bad++
							t.Errorf("op %d: DelayFrom %v, x/time/rate %v", op, ld, xd)
						}
					} else if got, want := tr.AllowN(now, "k", n), x.AllowN(now, n); got {
						admitted++
						if !want {
							bad++
							t.Errorf("op %d at +%v: AllowN(%d) = true, x/time/rate false (x tokens %v)", op, now.Sub(a45T0), n, xt)
						}
					} else if want {
						bad++
						t.Errorf("op %d at +%v: AllowN(%d) = false, x/time/rate true (x tokens %v)", op, now.Sub(a45T0), n, xt)
					}
					if bad > 10 {
						t.Fatal("too many")
					}
				}
				t.Logf("10000 ops, %d AllowN admitted, mismatches %d", admitted, bad)
			})
		}
	}
}
