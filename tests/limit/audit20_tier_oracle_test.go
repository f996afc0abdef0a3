package limit_test

// audit20: the Limiter's own policy and exact Tiers deciding on the SAME
// key (a key's debt is held as time to drain: "every policy of the
// limiter sees the same debt"), against a rational bucket in New's
// tokens, under a fake clock stepping both ways, with stale and future t,
// the short forms (at Now), ReserveN and Cancel.

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a20pol is a policy priced in New's tokens: a token costs cost, the
// burst is burst x cost.
type a20pol struct {
	name  string
	cost  *big.Rat
	burst int
}

func (p a20pol) cap() *big.Rat { return new(big.Rat).Mul(p.cost, big.NewRat(int64(p.burst), 1)) }
func (p a20pol) of(n int) *big.Rat {
	return new(big.Rat).Mul(p.cost, big.NewRat(int64(n), 1))
}

func TestAudit20TierSharedKeyOracle(t *testing.T) {
	testsize.Serial(t)
	const R = 10 // New's rate: 1/100 token per ms
	rate := big.NewRat(1, 100)
	steps := []int64{0, 1, 50, 99, 100, 101, 299, 300, 400, 1_000, 60_000, 3_600_000}
	for _, eng := range a20Engines {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%v/%d", eng, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 2020))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(R, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(seed), limit.WithMaxDebt(40), limit.WithName("base"))
				if err != nil {
					t.Fatal(err)
				}
				type tgt interface {
					DecideN(time.Time, string, int) limit.Decision
					PeekN(time.Time, string, int) limit.Decision
					ReserveN(time.Time, string, int) *limit.Reservation
					TokensAt(time.Time, string) float64
					Decide(string) limit.Decision
					Now() time.Time
				}
				tgts := []tgt{l}
				pols := []a20pol{{"base", big.NewRat(1, 1), 10}}
				for _, tc := range []struct {
					name  string
					lim   limit.Limit
					burst int
					cost  *big.Rat
				}{
					{"quarter", 2.5, 8, big.NewRat(4, 1)},
					{"double", 20, 10, big.NewRat(1, 2)},
					{"third", limit.Every(300 * time.Millisecond), 6, big.NewRat(3, 1)},
					{"twofifths", 25, 12, big.NewRat(2, 5)},
				} {
					tr, err := l.Tier(tc.name, tc.lim, tc.burst)
					if err != nil {
						t.Fatal(err)
					}
					if !tr.Exact() {
						t.Logf("tier %s not exact: left out", tc.name)
						continue
					}
					tgts = append(tgts, tr)
					pols = append(pols, a20pol{tc.name, tc.cost, tc.burst})
				}
				if len(tgts) < 3 {
					t.Fatalf("only %d exact policies", len(tgts))
				}
				maxD := big.NewRat(40, 1)
				debt, hw := new(big.Rat), clk.NowMillis()
				after := func(x int64) *big.Rat {
					d := new(big.Rat).Sub(debt, new(big.Rat).Mul(rate, big.NewRat(x, 1)))
					if d.Sign() < 0 {
						d.SetInt64(0)
					}
					return d
				}
				move := func(at, c int64) {
					if e := min(at, c); e > hw {
						debt, hw = after(e-hw), e
					}
				}
				fits := func(x int64, need, lim *big.Rat) bool {
					d := after(x)
					return d.Add(d, need).Cmp(lim) <= 0
				}
				fill := func(p a20pol, d *limit.Decision, gap int64) {
					rem := new(big.Rat).Quo(new(big.Rat).Sub(p.cap(), debt), p.cost)
					d.Remaining = 0
					if rem.Sign() > 0 {
						d.Remaining = int(new(big.Int).Quo(rem.Num(), rem.Denom()).Int64())
					}
					d.ResetAfter, d.NextAfter = 0, 0
					if debt.Sign() > 0 {
						d.ResetAfter = time.Duration(gap+a18least(0, func(x int64) bool { return after(x).Sign() == 0 })) * time.Millisecond
						d.NextAfter = time.Duration(gap+a18least(0, func(x int64) bool { return fits(x, p.of(d.Remaining+1), p.cap()) })) * time.Millisecond
					}
				}
				var res []*limit.Reservation
				var resN []*big.Rat // the debt before the take and right after it
				var resHw int64
				denials := 0
				for i := range 400 {
					s := steps[rng.IntN(len(steps))]
					switch rng.IntN(5) {
					case 0, 1, 2:
						clk.Set(clk.NowMillis() + s)
					case 3:
						clk.Set(clk.NowMillis() - s)
					}
					c := clk.NowMillis()
					var at int64
					short := false
					switch rng.IntN(5) {
					case 0:
						at, short = c, true
					case 1:
						at = c
					case 2:
						at = hw - int64(rng.IntN(500))
					case 3:
						at = c - steps[rng.IntN(len(steps))]
					default:
						at = c + steps[rng.IntN(len(steps))]
					}
					j := rng.IntN(len(tgts))
					tg, p := tgts[j], pols[j]
					n := 1 + rng.IntN(p.burst+1)
					if rng.IntN(2) == 0 {
						n = 1
					}
					if short {
						n = 1
					}
					where := fmt.Sprintf("step %d: %s n %d t %d clock %d hw %d debt %s", i, p.name, n, at, c, hw, debt.FloatString(3))
					switch op := rng.IntN(7); {
					case op <= 3: // DecideN / Decide / PeekN
						commit := op != 3
						if n > p.burst && !commit {
							n = p.burst
						}
						move(at, c)
						gap := max(hw-min(at, c), 0) // from t, or from the reading when t is ahead of it
						var got limit.Decision
						switch {
						case !commit:
							got = tg.PeekN(time.UnixMilli(at), "k", n)
						case short:
							got = tg.Decide("k")
						default:
							got = tg.DecideN(time.UnixMilli(at), "k", n)
						}
						want := limit.Decision{Limit: got.Limit, Burst: p.burst, Policy: p.name}
						switch {
						case n > p.burst:
							want.Never, want.RetryAfter = true, limit.InfDuration
						case fits(0, p.of(n), p.cap()):
							want.Allowed = true
						default:
							denials++
							want.RetryAfter = time.Duration(gap+a18least(1, func(x int64) bool { return fits(x, p.of(n), p.cap()) })) * time.Millisecond
						}
						saved := new(big.Rat).Set(debt)
						if want.Allowed {
							debt.Add(debt, p.of(n))
						}
						fill(p, &want, gap)
						if !commit {
							debt = saved
						}
						if got != want {
							t.Fatalf("%s:\n got  %+v\n want %+v", where, got, want)
						}
						if commit {
							res, resN = res[:0], resN[:0] // a write (or a try) since: no exact Cancel promised
						}
					case op == 4: // ReserveN
						if n > p.burst {
							n = p.burst
						}
						move(at, c)
						r := tg.ReserveN(time.UnixMilli(at), "k", n)
						ok := new(big.Rat).Add(debt, p.of(n)).Cmp(maxD) <= 0
						if r.OK() != ok {
							t.Fatalf("%s: ReserveN OK %v, want %v", where, r.OK(), ok)
						}
						if !ok {
							break
						}
						before := new(big.Rat).Set(debt)
						debt.Add(debt, p.of(n))
						x := a18least(0, func(x int64) bool { return fits(x, new(big.Rat), p.cap()) })
						if got, want := r.DelayFrom(time.UnixMilli(at)), time.Duration(max(hw+x-at, 0))*time.Millisecond; got != want {
							t.Fatalf("%s: DelayFrom(t) %v, want %v", where, got, want)
						}
						res, resN, resHw = append(res[:0], r), append(resN[:0], before, new(big.Rat).Set(debt)), hw
					case op == 5: // Cancel the latest reservation, if nothing but reads happened since (clock moves included)
						if len(res) == 0 {
							break
						}
						// As if never taken, the drain since included; never
						// given back when it filled the key to MaxDebt.
						if resN[1].Cmp(maxD) < 0 {
							d := new(big.Rat).Sub(resN[0], new(big.Rat).Mul(rate, big.NewRat(hw-resHw, 1)))
							if d.Sign() < 0 {
								d.SetInt64(0)
							}
							debt = d
						}
						res[0].Cancel()
						res, resN = res[:0], resN[:0]
					default: // TokensAt
						move(at, c)
						got := tg.TokensAt(time.UnixMilli(at), "k")
						w, _ := new(big.Rat).Quo(new(big.Rat).Sub(p.cap(), debt), p.cost).Float64()
						if d := got - w; d > 1e-9 || d < -1e-9 {
							t.Fatalf("%s: TokensAt %v, want %v", where, got, w)
						}
					}
				}
				if denials < 20 {
					t.Fatalf("weak run: %d denials", denials)
				}
			})
		}
	}
}
