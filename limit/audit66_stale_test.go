package limit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a66TOp is a step with an explicit clock reading and t offset.
type a66TOp struct {
	clock int64 // clock reading, ms (may step back)
	tOff  int64 // t = clock + tOff ms (negative: stale; positive: ahead)
	n     int
	tier  bool
	set   limit.Limit
	res   bool // ReserveN instead of DecideN
}

// TestAudit66StaleTPredictions: Decision's RetryAfter "is the time after
// which the same request would be admitted if nothing else happened to
// the key: a retry at t+RetryAfter is admitted and one 1 ms earlier is
// not", with durations "measured from the request's t (from the clock's
// reading when t is ahead of it, as the decision is)" and "never early"
// (doc.go, "Keys and time": "with the lag to the time the limiter
// decided at included"). Schedules with a clock that steps back, stale
// t's and t's ahead of the clock, SetLimit and an exact Tier; each denial
// is checked on a twin at base+RetryAfter (admitted) and 1 ms before
// (denied); a ReserveN's act time (t + DelayFrom(t)) is never early: the
// key is back within its burst there ("a stale t never makes the
// requests act early", ReserveN).
func TestAudit66StaleTPredictions(t *testing.T) {
	testsize.Serial(t)
	type cfg struct {
		name string
		lim  limit.Limit
		b    int
		opts []limit.Option
	}
	for _, c := range []cfg{
		{"third/buckets", 1.0 / 3, 3, []limit.Option{limit.WithMaxDebt(12)}},
		{"7/13ms/cm", 7000.0 / 13, 20, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 64)}},
		{"pi/cm", 3.14159, 4, []limit.Option{limit.WithSize(2, 64), limit.WithMaxDebt(16)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func(seed uint64) (*limit.Limiter, *limit.Tier, *sketchtest.FakeClock) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				l, err := limit.New(c.lim, c.b, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				tr, err := l.Tier("half", c.lim/2, max(c.b/2, 1))
				if err != nil {
					t.Fatal(err)
				}
				return l, tr, clk
			}
			apply := func(l *limit.Limiter, tr *limit.Tier, clk *sketchtest.FakeClock, op a66TOp) limit.Decision {
				clk.Set(op.clock)
				if op.set != 0 {
					_ = l.SetLimit(op.set)
					return limit.Decision{}
				}
				tm := time.UnixMilli(op.clock + op.tOff)
				if op.res {
					var r *limit.Reservation
					if op.tier {
						r = tr.ReserveN(tm, "k", op.n)
					} else {
						r = l.ReserveN(tm, "k", op.n)
					}
					if !r.OK() {
						return limit.Decision{Never: true}
					}
					// smuggle the act time out in ResetAfter (ms since epoch)
					return limit.Decision{Allowed: true, ResetAfter: time.Duration(tm.Add(r.DelayFrom(tm)).UnixMilli())}
				}
				if op.tier {
					return tr.DecideN(tm, "k", op.n)
				}
				return l.DecideN(tm, "k", op.n)
			}
			tok := int(1000/float64(c.lim)) + 1
			checks := 0
			for seed := uint64(0); seed < uint64(testsize.Sample(5, 5, 2)); seed++ {
				rng := rand.New(rand.NewPCG(seed, 18))
				l, tr, clk := build(seed)
				clock := int64(1_000_000)
				var ops []a66TOp
				for s := 0; s < 80; s++ {
					switch x := rng.IntN(10); {
					case x < 6:
						clock += int64(rng.IntN(tok + 1))
					case x < 8:
						clock -= int64(rng.IntN(tok + 1)) // step back
					default:
					}
					op := a66TOp{clock: clock, n: 1 + rng.IntN(c.b)}
					switch x := rng.IntN(10); {
					case x < 3:
						op.tOff = -int64(rng.IntN(3 * tok))
					case x < 4:
						op.tOff = int64(rng.IntN(tok))
					}
					if rng.IntN(4) == 0 {
						op.tier = true
						op.n = 1 + rng.IntN(max(c.b/2, 1))
					}
					if rng.IntN(25) == 0 {
						op.set = []limit.Limit{c.lim, c.lim / 2, c.lim / 3}[rng.IntN(3)]
					}
					op.res = rng.IntN(5) == 0
					ops = append(ops, op)
					d := apply(l, tr, clk, op)
					if op.res && d.Allowed && op.set == 0 {
						act := int64(d.ResetAfter)
						tokens := func(at int64) float64 {
							l2, tr2, clk2 := build(seed)
							for _, o := range ops {
								apply(l2, tr2, clk2, o)
							}
							clk2.Set(at)
							if op.tier {
								return tr2.TokensAt(l2.Now(), "k")
							}
							return l2.TokensAt(l2.Now(), "k")
						}
						if tk := tokens(act); tk < -1e-9 {
							t.Fatalf("seed %d step %d: reservation (clock %d t%+d n=%d tier=%v) acts at %d, where the key still owes past its burst (tokens %v)", seed, s, op.clock, op.tOff, op.n, op.tier, act, tk)
						}
						checks++
					}
					if op.res {
						continue
					}
					if op.set != 0 || d.Allowed || d.Never {
						continue
					}
					base := op.clock + min(op.tOff, 0) // from t, or the reading when t is ahead
					at := base + d.RetryAfter.Milliseconds()
					l2, tr2, clk2 := build(seed)
					for _, o := range ops[:len(ops)-1] {
						apply(l2, tr2, clk2, o)
					}
					// retry at base+RetryAfter, on a clock reading that time
					p := apply(l2, tr2, clk2, a66TOp{clock: at, n: op.n, tier: op.tier})
					desc := fmt.Sprintf("seed %d step %d: clock %d t%+d n=%d tier=%v: %+v", seed, s, op.clock, op.tOff, op.n, op.tier, d)
					if !p.Allowed {
						t.Fatalf("%s: a retry at t+RetryAfter (%d) is denied: %+v", desc, at, p)
					}
					l3, tr3, clk3 := build(seed)
					for _, o := range ops[:len(ops)-1] {
						apply(l3, tr3, clk3, o)
					}
					if q := apply(l3, tr3, clk3, a66TOp{clock: at - 1, n: op.n, tier: op.tier}); q.Allowed {
						t.Errorf("%s: a retry 1 ms before t+RetryAfter (%d) is admitted", desc, at-1)
					}
					checks++
				}
			}
			t.Logf("%d checks", checks)
		})
	}
}
