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

// TestAudit45XRateDifferential runs one random sequence of AllowN,
// ReserveN and immediate Cancel at increasing whole-ms fake times on
// golang.org/x/time/rate and on limit (one key, exact-unit rates), and
// compares every decision, TokensAt and DelayFrom. limit's promises:
// every decision is the rational bucket's at the millisecond (doc
// "Exactness"), durations are whole ms and never early (readings.md,
// "Arithmetic": x/time/rate truncates to the ns), a reservation past
// MaxDebt is not OK (x/time/rate queues without bound), a Cancel with
// nothing written since is an exact undo (as x/time/rate's CancelAt at
// the same t for the last reservation).
func TestAudit45XRateDifferential(t *testing.T) {
	testsize.Serial(t)
	cases := []struct {
		r     limit.Limit
		b     int
		steps []time.Duration // max advance
	}{
		{10, 20, nil},
		{3, 7, nil},
		{limit.Every(7 * time.Millisecond), 5, nil},
		{limit.Every(3 * time.Second), 4, nil},
		{1000, 1000, nil},
		// limit/doc.go "Exactness": exact count-min at MaxDebt 2 x burst for
		// "bursts up to 2330 at 1000/h, 139 at 1/minute, 83886 at 10/s".
		{limit.Limit(1000.0 / 3600), 2330, []time.Duration{0}},
		{limit.Every(time.Minute), 139, []time.Duration{0}},
		{10, 83886, []time.Duration{0}},
		{limit.Every(7 * time.Millisecond), 20000, []time.Duration{0}},
	}
	for ci, c := range cases {
		for vi, eng := range []limit.Engine{limit.Buckets, limit.CountMin, limit.CountMin, limit.Buckets, limit.CountMin} {
			longPeriod := vi >= 2
			optimistic := vi >= 3
			name := fmt.Sprint(eng)
			if longPeriod && eng == limit.CountMin {
				name += "-period1000h"
			}
			if optimistic {
				name += "-optimistic"
			}
			t.Run(fmt.Sprintf("%v/%d/%v", float64(c.r), c.b, name), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.SetTime(a45T0)
				maxDebt := 3 * c.b
				if c.steps != nil {
					maxDebt = 2 * c.b
				}
				l, err := limit.New(c.r, c.b, limit.WithClock(clk), limit.WithSeed(uint64(ci)), limit.WithEngine(eng), limit.WithMaxDebt(float64(maxDebt)))
				if longPeriod {
					o := []limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(ci)), limit.WithEngine(eng), limit.WithMaxDebt(float64(maxDebt)), limit.WithStrict(!optimistic)}
					if eng == limit.CountMin {
						o = append(o, limit.WithPeriod(1000*time.Hour))
					}
					l, err = limit.New(c.r, c.b, o...)
				}
				if err != nil && eng == limit.Buckets && c.steps != nil {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !l.Exact() {
					t.Fatalf("not Exact")
				}
				x := rate.NewLimiter(rate.Limit(c.r), c.b)
				tok := time.Duration(float64(time.Second) / float64(c.r))
				rng := rand.New(rand.NewPCG(45, uint64(ci)))
				var nAllow, nRes, nCancel, nBoundary, nMaxDebt, mism int
				const eps = 1e-9
				for op := range testsize.Pick(20000, 7000) {
					if rng.IntN(3) > 0 {
						clk.Advance(time.Duration(rng.Float64() * 2 * float64(tok)).Truncate(time.Millisecond))
					}
					now := clk.Now()
					xt := x.TokensAt(now)
					if lt := l.TokensAt(now, "k"); math.Abs(lt-xt) > 1e-6 {
						if eng == limit.CountMin && !longPeriod {
							// Documented amnesty (doc "Rotation and amnesty"): a key
							// never silent gains at most its old debt, <= MaxDebt,
							// when a generation is promoted; only in the
							// permissive direction, only after a rotation.
							rot := l.Stats().Rotations
							if lt < xt || lt-xt > float64(maxDebt) || rot == 0 {
								t.Errorf("op %d at +%v: TokensAt = %v, x/time/rate %v: not the documented amnesty (rotations %d)", op, now.Sub(a45T0), lt, xt, rot)
							}
							t.Logf("op %d at +%v: amnesty at rotation %d (period %v): gained %.4f tokens (MaxDebt %d); stop", op, now.Sub(a45T0), rot, l.Period(), lt-xt, maxDebt)
							return
						}
						mism++
						if mism < 10 {
							t.Errorf("op %d at +%v (rotations %d, period %v): TokensAt = %v, x/time/rate %v", op, now.Sub(a45T0), l.Stats().Rotations, l.Period(), lt, xt)
						}
					}
					n := 1 + rng.IntN(c.b+1)
					if rng.IntN(4) == 0 {
						n = 1 + rng.IntN(max(1, c.b/3))
					}
					switch rng.IntN(3) {
					case 0, 1:
						nAllow++
						got := l.AllowN(now, "k", n)
						if math.Abs(xt-float64(n)) < eps {
							nBoundary++
							// decide x/time/rate as the exact bucket does: keep states equal.
							if got {
								x.ReserveN(now, n)
							}
							continue
						}
						want := x.AllowN(now, n)
						if got != want {
							mism++
							if mism < 10 {
								t.Errorf("op %d at +%v: AllowN(%d) = %v, x/time/rate %v (x tokens %v)", op, now.Sub(a45T0), n, got, want, xt)
							}
							return
						}
					case 2:
						nRes++
						r := l.ReserveN(now, "k", n)
						if n > c.b {
							if r.OK() || r.DelayFrom(now) != rate.InfDuration {
								t.Errorf("op %d: ReserveN(%d > burst) ok %v delay %v", op, n, r.OK(), r.DelayFrom(now))
							}
							continue
						}
						if float64(c.b)-xt+float64(n) > float64(maxDebt)+eps {
							nMaxDebt++
							if r.OK() {
								t.Errorf("op %d: ReserveN(%d) OK past MaxDebt %d (x tokens %v)", op, n, maxDebt, xt)
								return
							}
							continue
						}
						if math.Abs(float64(c.b)-xt+float64(n)-float64(maxDebt)) < eps {
							nBoundary++
							if r.OK() {
								x.ReserveN(now, n)
							}
							continue
						}
						xr := x.ReserveN(now, n)
						if !r.OK() {
							t.Errorf("op %d: ReserveN(%d) not OK, x/time/rate OK (x tokens %v, MaxDebt %d)", op, n, xt, maxDebt)
							return
						}
						ld, xd := r.DelayFrom(now), xr.DelayFrom(now)
						// limit: whole ms, never early; x/time/rate truncates to the ns.
						if ld < xd || ld-xd >= time.Millisecond+time.Nanosecond || ld%time.Millisecond != 0 {
							mism++
							if mism < 10 {
								t.Errorf("op %d: ReserveN(%d).DelayFrom = %v, x/time/rate %v", op, n, ld, xd)
							}
						}
						if rng.IntN(3) == 0 {
							nCancel++
							r.Cancel()
							xr.CancelAt(now)
							if lt, xt2 := l.TokensAt(now, "k"), x.TokensAt(now); math.Abs(lt-xt2) > 1e-6 {
								mism++
								if mism < 10 {
									t.Errorf("op %d: after Cancel TokensAt = %v, x/time/rate %v", op, lt, xt2)
								}
							}
						}
					}
					if mism > 20 {
						t.Fatal("too many mismatches")
					}
				}
				t.Logf("allow %d, reserve %d, cancel %d, boundary %d, past MaxDebt %d, mismatches %d", nAllow, nRes, nCancel, nBoundary, nMaxDebt, mism)
			})
		}
	}
}
