package limit_test

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

// a18bucket is the rational token bucket of the package doc ("Exactness")
// whose time is the high-water mark of the times the limiter used: a
// backwards clock step, or a stale t, is no elapsed time, and a t ahead
// of the clock's reading counts as that reading. Debt is in tokens, time
// in whole ms.
type a18bucket struct {
	rate  *big.Rat // tokens per ms
	burst *big.Rat
	maxD  *big.Rat
	debt  *big.Rat
	hw    int64
	seen  bool
}

func newA18Bucket(perSec int64, burst int, maxDebt float64) *a18bucket {
	md := new(big.Rat)
	md.SetFloat64(maxDebt)
	return &a18bucket{rate: big.NewRat(perSec, 1000), burst: big.NewRat(int64(burst), 1), maxD: md, debt: new(big.Rat)}
}

// at moves the bucket to the time the limiter decides a call at t
// (ms) with the clock reading c.
func (b *a18bucket) at(t, c int64) {
	e := min(t, c)
	if !b.seen {
		b.seen, b.hw = true, e
		return
	}
	if e <= b.hw {
		return
	}
	b.debt = b.after(e - b.hw)
	b.hw = e
}

// after returns the debt x ms after the bucket's time.
func (b *a18bucket) after(x int64) *big.Rat {
	d := new(big.Rat).Sub(b.debt, new(big.Rat).Mul(b.rate, big.NewRat(x, 1)))
	if d.Sign() < 0 {
		d.SetInt64(0)
	}
	return d
}

// fitsAfter reports whether a debt d drained x ms leaves room for n
// tokens within limit lim.
func (b *a18bucket) fitsAfter(x int64, n, lim *big.Rat) bool {
	d := b.after(x)
	return d.Add(d, n).Cmp(lim) <= 0
}

// least returns the least x >= lo with ok(x) (ok monotone).
func a18least(lo int64, ok func(int64) bool) int64 {
	hi := max(lo, 1)
	for !ok(hi) {
		hi *= 2
	}
	for lo < hi {
		m := lo + (hi-lo)/2
		if ok(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// fill returns Remaining, ResetAfter, NextAfter for the bucket's debt,
// the durations counted from t (gap = how far the bucket's time is after
// t).
func (b *a18bucket) fill(t int64) (int, time.Duration, time.Duration) {
	gap := max(b.hw-t, 0)
	_ = gap
	rem := new(big.Rat).Sub(b.burst, b.debt)
	r := 0
	if rem.Sign() > 0 {
		q := new(big.Int).Quo(rem.Num(), rem.Denom())
		r = int(q.Int64())
	}
	if b.debt.Sign() == 0 {
		return r, 0, 0
	}
	reset := a18least(0, func(x int64) bool { return b.after(x).Sign() == 0 })
	next := a18least(0, func(x int64) bool { return b.fitsAfter(x, big.NewRat(int64(r+1), 1), b.burst) })
	return r, time.Duration(gap+reset) * time.Millisecond, time.Duration(gap+next) * time.Millisecond
}

// TestAudit18TimeOracle: random sequences of DecideN, PeekN, ReserveN
// (DelayFrom at t and at the clock's reading) and TokensAt for one key
// alone in its cells of an exact limiter, with the clock stepping forward
// and back by ms, hours, days, 2^31 ms and more, and t given as the
// clock's reading, stale (by ms to years) or ahead of the clock. Every
// number is the rational bucket's, measured from t ("from t for a stale
// t (the lag included), from the clock's reading for a future one").
var a18trace = false

// a18target is what Limiter and Tier share.
type a18target interface {
	DecideN(time.Time, string, int) limit.Decision
	PeekN(time.Time, string, int) limit.Decision
	ReserveN(time.Time, string, int) *limit.Reservation
	TokensAt(time.Time, string) float64
}

func TestAudit18TimeOracle(t *testing.T) {
	testsize.Serial(t)
	type cfg struct {
		perSec int64
		burst  int
		eng    limit.Engine
	}
	cfgs := []cfg{{10, 10, limit.Buckets}, {10, 10, limit.CountMin}, {1000, 5, limit.Buckets}, {3, 4, limit.CountMin}, {250, 20, limit.Auto}, {1, 3, limit.CountMin}}
	steps := []int64{0, 1, 7, 99, 100, 101, 999, 3_600_000, 86_400_000, 1 << 31, 1<<31 + 1, 1 << 32, 400 * 86_400_000}
	for ci, c := range cfgs {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("%d/%s/%d", c.perSec, c.eng, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(limit.Limit(c.perSec), c.burst, limit.WithClock(clk), limit.WithEngine(c.eng), limit.WithSeed(seed))
				if err != nil {
					t.Fatal(err)
				}
				if !l.Exact() {
					t.Skip("not exact")
				}
				m, err := limit.NewMulti(l)
				if err != nil {
					t.Fatal(err)
				}
				b := newA18Bucket(c.perSec, c.burst, l.MaxDebt())
				b.seen, b.hw = true, clk.NowMillis() // New reads the clock
				// A tier of another policy on the same engine and time
				// scale, on its own key.
				tier, err := l.Tier("t", limit.Limit(2*c.perSec), c.burst+3)
				if err != nil || !tier.Exact() {
					tier = nil
				}
				var b2 *a18bucket
				if tier != nil {
					b2 = newA18Bucket(2*c.perSec, c.burst+3, tier.MaxDebt())
					b2.seen, b2.hw = true, b.hw
				}
				ms := func(d int64) time.Time { return time.UnixMilli(d) }
				for i := range 400 {
					// Move the clock.
					s := steps[rng.IntN(len(steps))]
					if rng.IntN(2) == 0 {
						s = int64(rng.IntN(300)) // mostly small steps, so that debts drain between calls
					}
					switch rng.IntN(4) {
					case 0, 1:
						clk.Set(clk.NowMillis() + s)
					case 2:
						clk.Set(clk.NowMillis() - s)
					}
					now := clk.NowMillis()
					// Choose t.
					var at int64
					switch rng.IntN(4) {
					case 0:
						at = now
					case 1:
						at = now - steps[rng.IntN(len(steps))]
					case 2:
						at = now + steps[rng.IntN(len(steps))]
					default:
						if b.seen {
							at = b.hw - int64(rng.IntN(3))
						} else {
							at = now
						}
					}
					var tg a18target = l
					tb, burst, key := b, c.burst, "k"
					if tier != nil && rng.IntN(3) == 0 {
						tg, tb, burst, key = tier, b2, c.burst+3, "tk"
					}
					n := 1 + rng.IntN(burst+1)
					nR := big.NewRat(int64(n), 1)
					op := rng.IntN(6)
					if op != 2 || n <= burst { // a ReserveN above the burst reads no time
						b.at(at, now)
						if b2 != nil {
							b2.at(at, now)
						}
					}
					where := fmt.Sprintf("step %d: clock %d, t %d (hw %d), n %d, op %d", i, now, at, tb.hw, n, op)
					// Durations count from t, or from the clock's reading
					// when t is ahead of it (audit20: from t alone, a t
					// between the reading and hw got waits early from the
					// reading).
					gap := max(tb.hw-min(at, now), 0)
					if a18trace {
						t.Logf("%s debt %s", where, tb.debt.FloatString(3))
					}
					switch op {
					case 0, 1, 5: // DecideN / PeekN / a Multi of the one window (strict, as l)
						commit := op != 1
						var d limit.Decision
						switch op {
						case 0:
							d = tg.DecideN(ms(at), key, n)
						case 5:
							if key == "k" {
								d = m.DecideKeys(ms(at), n, key)
							} else {
								d = tg.DecideN(ms(at), key, n)
							}
						default:
							d = tg.PeekN(ms(at), key, n)
						}
						fits := tb.fitsAfter(0, nR, tb.burst)
						var want limit.Decision
						want.Limit, want.Burst, want.Policy = d.Limit, d.Burst, d.Policy
						switch {
						case n > burst:
							want.Never, want.RetryAfter = true, limit.InfDuration
						case fits:
							want.Allowed = true
						default:
							x := a18least(1, func(x int64) bool { return tb.fitsAfter(x, nR, tb.burst) })
							want.RetryAfter = time.Duration(gap+x) * time.Millisecond
						}
						saved := new(big.Rat).Set(tb.debt)
						if want.Allowed {
							tb.debt.Add(tb.debt, nR)
						}
						want.Remaining, want.ResetAfter, want.NextAfter = tb.fill(min(at, now))
						if !commit {
							tb.debt = saved
						}
						if d != want {
							t.Fatalf("%s:\n got  %+v\n want %+v", where, d, want)
						}
					case 2: // ReserveN
						r := tg.ReserveN(ms(at), key, n)
						okWant := n <= burst && new(big.Rat).Add(tb.debt, nR).Cmp(tb.maxD) <= 0
						if r.OK() != okWant {
							t.Fatalf("%s: ReserveN OK %v, want %v (debt %v)", where, r.OK(), okWant, tb.debt.FloatString(3))
						}
						if !okWant {
							if r.Delay() != limit.InfDuration {
								t.Fatalf("%s: not OK, Delay %v", where, r.Delay())
							}
							break
						}
						tb.debt.Add(tb.debt, nR)
						x := a18least(0, func(x int64) bool { return tb.fitsAfter(x, new(big.Rat), tb.burst) })
						if got, want := r.DelayFrom(ms(at)), time.Duration(max(tb.hw+x-at, 0))*time.Millisecond; got != want {
							t.Fatalf("%s: DelayFrom(t) %v, want %v", where, got, want)
						}
						// The time to act is absolute: hw + x.
						if got, want := r.DelayFrom(ms(tb.hw+x)), time.Duration(0); got != want {
							t.Fatalf("%s: DelayFrom(act) %v, want 0", where, got)
						}
						if got, want := r.DelayFrom(ms(tb.hw+x-1)), time.Millisecond; got != want && x > 0 {
							t.Fatalf("%s: DelayFrom(act-1ms) %v, want 1ms", where, got)
						}
						if got, want := r.DelayFrom(ms(tb.hw+x).Add(-300*time.Microsecond)), 300*time.Microsecond; got != want {
							t.Fatalf("%s: DelayFrom(act-300us) %v, want 300us", where, got)
						}
						if rng.IntN(3) == 0 {
							r.Cancel() // nothing else touched the key: all of it back, unless it filled the key to MaxDebt
							if tb.debt.Cmp(tb.maxD) < 0 {
								tb.debt.Sub(tb.debt, nR)
							}
							if tb.debt.Sign() < 0 {
								t.Fatalf("%s: negative", where)
							}
						}
					case 3: // TokensAt
						got := tg.TokensAt(ms(at), key)
						w, _ := new(big.Rat).Sub(tb.burst, tb.debt).Float64()
						if d := got - w; d > 1e-9 || d < -1e-9 {
							t.Fatalf("%s: TokensAt %v, want %v", where, got, w)
						}
					case 4: // the Decision's RetryAfter honoured: at t+RetryAfter (clock there) the same request fits, 1 ms earlier not
						d := tg.PeekN(ms(at), key, n)
						if d.Allowed || d.Never {
							break
						}
						// The decision time is tb.hw; the retry time is
						// RetryAfter after t, or after the clock's reading
						// when t is ahead of it.
						retry := min(at, now) + d.RetryAfter.Milliseconds()
						if retry <= tb.hw {
							t.Fatalf("%s: RetryAfter %v lands at or before the limiter's time", where, d.RetryAfter)
						}
						if !tb.fitsAfter(retry-tb.hw, nR, tb.burst) || tb.fitsAfter(retry-1-tb.hw, nR, tb.burst) && retry-1 > tb.hw {
							t.Fatalf("%s: RetryAfter %v not exact", where, d.RetryAfter)
						}
					}
				}
			})
		}
	}
}

// TestAudit18InfReserveFuture: an Inf limiter keeps no state, and its
// Reservation acts at t, or at the clock's reading for a t ahead of it
// ("a t after the clock's reading counts as that reading"); and a stale
// t acts at t (Delay 0 from any later time).
func TestAudit18InfReserveFuture(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(limit.Inf, 1, limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	for _, at := range []time.Time{now, now.Add(time.Hour), now.Add(1 << 40 * time.Millisecond), now.Add(-time.Hour)} {
		r := l.ReserveN(at, "k", 5)
		if !r.OK() || r.Delay() != 0 || r.DelayFrom(now) != 0 {
			t.Errorf("Inf ReserveN(%v) = OK %v, Delay %v, DelayFrom(clock) %v; want OK, 0, 0", at.Sub(now), r.OK(), r.Delay(), r.DelayFrom(now))
		}
	}
}
