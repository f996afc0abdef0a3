package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// TestAudit45XRateDifferentialKeysIdle: 40 keys, each against its own
// x/time/rate Limiter, random AllowN/ReserveN with idle jumps of up to
// 3 h now and then (past the Buckets engine's 16-bit tick residues and
// the count-min's horizon): every decision and TokensAt agrees (keys
// alone in their cells: doc "Exactness").
func TestAudit45XRateDifferentialKeysIdle(t *testing.T) {
	testsize.Serial(t)
	cases := []struct {
		r limit.Limit
		b int
	}{{10, 20}, {3, 7}, {limit.Every(7 * time.Millisecond), 5}, {1000, 1000}}
	for ci, c := range cases {
		for _, eng := range a45Engines {
			t.Run(fmt.Sprintf("%v/%d/%v", float64(c.r), c.b, eng), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.SetTime(a45T0)
				o := []limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(ci + 100)), limit.WithEngine(eng), limit.WithMaxDebt(float64(3 * c.b))}
				if eng == limit.CountMin {
					o = append(o, limit.WithPeriod(10000*time.Hour))
				}
				l, err := limit.New(c.r, c.b, o...)
				if err != nil {
					t.Fatal(err)
				}
				const keys = 40
				xs := make([]*rate.Limiter, keys)
				for i := range xs {
					xs[i] = rate.NewLimiter(rate.Limit(c.r), c.b)
				}
				tok := time.Duration(float64(time.Second) / float64(c.r))
				rng := rand.New(rand.NewPCG(4545, uint64(ci)))
				bad, boundary := 0, 0
				for op := range testsize.Pick(30000, 10000) {
					switch rng.IntN(100) {
					case 0:
						clk.Advance(time.Duration(rng.Int64N(int64(3 * time.Hour))).Truncate(time.Millisecond))
					case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20:
						clk.Advance(time.Duration(rng.Float64() * float64(tok)).Truncate(time.Millisecond))
					}
					k := rng.IntN(keys)
					key := fmt.Sprint("user-", k)
					now := clk.Now()
					xt := xs[k].TokensAt(now)
					if lt := l.TokensAt(now, key); math.Abs(lt-xt) > 1e-6 {
						bad++
						t.Errorf("op %d at +%v key %d: TokensAt %v, x/time/rate %v", op, now.Sub(a45T0), k, lt, xt)
					}
					n := 1 + rng.IntN(max(1, c.b/2))
					if math.Abs(xt-float64(n)) < 1e-9 {
						boundary++
						if l.AllowN(now, key, n) {
							xs[k].AllowN(now, n) // keep both exact
						}
						continue
					}
					if rng.IntN(4) == 0 && float64(c.b)-xt+float64(n) < float64(3*c.b)-1e-9 {
						r, xr := l.ReserveN(now, key, n), xs[k].ReserveN(now, n)
						if !r.OK() {
							bad++
							t.Errorf("op %d: ReserveN not OK within MaxDebt", op)
						} else if ld, xd := r.DelayFrom(now), xr.DelayFrom(now); ld < xd || ld-xd > time.Millisecond {
							bad++
							t.Errorf("op %d: DelayFrom %v, x/time/rate %v", op, ld, xd)
						}
					} else if got, want := l.AllowN(now, key, n), xs[k].AllowN(now, n); got != want {
						bad++
						t.Errorf("op %d at +%v key %d: AllowN(%d) = %v, x/time/rate %v (x tokens %v)", op, now.Sub(a45T0), k, n, got, want, xt)
					}
					if bad > 10 {
						t.Fatal("too many")
					}
				}
				t.Logf("elapsed %v, boundary %d, mismatches %d", clk.Now().Sub(a45T0), boundary, bad)
			})
		}
	}
}
