package limit_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit98BucketsConcurrentMixedOneSided is the concurrent form of
// TestAudit98BucketsMixedOpsFullTableOneSided (without SetLimit and
// SetBurst, which would change the policy under other goroutines'
// decisions): four goroutines each own 50 keys of a tiny Buckets limiter
// (WithCapacity(24, 0.01), WithRejectCost(1)) and, in each of 300 phases
// at one instant (the clock moves 0..1000 ms between phases, and steps
// back up to 1 s one time in 30), make 3 requests on them (decide,
// reserve, cancel) through the limiter and two Tiers, while a fifth
// goroutine floods the table with 10 fresh keys at full debt; the
// table's Saturation reaches 1. Each key's own exact bucket,
// followed by its owner as a lower bound (a98bkLow), must never be
// exceeded by an admission or undercut by a reservation's time to act or
// a denial's RetryAfter (limit/doc.go, "Error side"; internal/bucket's
// doc.go: "Across keys it never over-admits"). GOMAXPROCS 1, 2, 4, 8;
// run it under -race too.
func TestAudit98BucketsConcurrentMixedOneSided(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := limittest.NewFakeClock()
		clk.Set(1_800_000_000_000)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(5), limit.WithCapacity(24, 0.01),
			limit.WithMaxDebt(80), limit.WithRejectCost(1), limit.WithEngine(limit.Buckets))
		if err != nil {
			t.Fatal(err)
		}
		half, err := l.Tier("half", 5, 10)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := l.Tier("slow", 2.5, 20)
		if err != nil {
			t.Fatal(err)
		}
		const owners, perOwner, maxDebt = 4, 50, 8000
		type pending struct {
			key  int
			cost int64
			r    *limit.Reservation
		}
		low := make([][]a98bkLow, owners)
		open := make([][]pending, owners)
		hw := clk.NowMillis()
		for o := range low {
			low[o] = make([]a98bkLow, perOwner)
			for i := range low[o] {
				low[o][i].at = hw
			}
		}
		rng := rand.New(rand.NewPCG(98, 2))
		var admitted, denied, reserved [owners]int
		maxSat := 0.0
		for phase := range 300 {
			if rng.IntN(30) == 0 {
				clk.Set(clk.NowMillis() - int64(rng.IntN(1000)))
			} else {
				clk.Advance(time.Duration(rng.IntN(1001)) * time.Millisecond)
			}
			now := l.Now()
			hw = max(hw, now.UnixMilli())
			errs := make(chan string, owners)
			var wg sync.WaitGroup
			for o := range owners {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(phase), uint64(o)))
					for range 3 {
						i := r.IntN(perOwner)
						key := fmt.Sprintf("own%d-%d", o, i)
						lo := &low[o][i]
						lo.drain(hw)
						n := 1 + r.IntN(10)
						var pol a98bkPol
						var decide func() limit.Decision
						var reserve func() *limit.Reservation
						switch r.IntN(3) {
						case 0:
							pol = a98bkPol{100, 2000}
							decide = func() limit.Decision { return l.DecideN(now, key, n) }
							reserve = func() *limit.Reservation { return l.ReserveN(now, key, n) }
						case 1:
							pol = a98bkPol{200, 2000}
							decide = func() limit.Decision { return half.DecideN(now, key, n) }
							reserve = func() *limit.Reservation { return half.ReserveN(now, key, n) }
						default:
							pol = a98bkPol{400, 8000}
							decide = func() limit.Decision { return slow.DecideN(now, key, n) }
							reserve = func() *limit.Reservation { return slow.ReserveN(now, key, n) }
						}
						cost := int64(n) * pol.cost
						if cost > pol.burst {
							continue
						}
						if r.IntN(4) != 0 {
							d := decide()
							if d.Allowed {
								if lo.d+cost > pol.burst {
									errs <- fmt.Sprintf("%s admitted %d ms of %v; its own bucket owes >= %d ms", key, cost, pol, lo.d)
									return
								}
								admitted[o]++
								lo.d += cost
								continue
							}
							if wait := lo.d + cost - pol.burst; d.RetryAfter < time.Duration(wait)*time.Millisecond {
								errs <- fmt.Sprintf("%s denied %d ms of %v, RetryAfter %v; its own bucket (>= %d ms) needs >= %d ms", key, cost, pol, d.RetryAfter, lo.d, wait)
								return
							}
							denied[o]++
							lo.d = min(lo.d+pol.cost, maxDebt)
						} else if rv := reserve(); rv.OK() {
							if want := max(0, lo.d+cost-pol.burst); lo.d+cost > maxDebt || rv.DelayFrom(time.UnixMilli(hw)) < time.Duration(want)*time.Millisecond {
								errs <- fmt.Sprintf("%s reserved %d ms of %v acting %v after the decision; its own bucket (>= %d ms) needs %d ms within MaxDebt", key, cost, pol, rv.DelayFrom(time.UnixMilli(hw)), lo.d, want)
								return
							}
							reserved[o]++
							lo.d += cost
							open[o] = append(open[o], pending{i, cost, rv})
						}
						if len(open[o]) > 0 && r.IntN(3) == 0 {
							k := r.IntN(len(open[o]))
							p := open[o][k]
							open[o] = append(open[o][:k], open[o][k+1:]...)
							p.r.Cancel()
							c := &low[o][p.key]
							c.drain(hw)
							c.d = max(0, c.d-p.cost)
						}
					}
				})
			}
			wg.Go(func() {
				for i := range 10 {
					l.AllowN(now, fmt.Sprintf("flood%d-%d", phase, i), 20)
				}
			})
			wg.Wait()
			close(errs)
			maxSat = max(maxSat, l.Stats().Saturation)
			for e := range errs {
				t.Fatalf("phase %d at +%d ms: %s", phase, hw-1_800_000_000_000, e)
			}
		}
		var a, d, r int
		for o := range owners {
			a, d, r = a+admitted[o], d+denied[o], r+reserved[o]
		}
		if a < 500 || d < 500 || r < 200 || maxSat < 0.2 {
			t.Fatalf("admitted %d, denied %d, reserved %d, Saturation at most %v: the run did not exercise a full table", a, d, r, maxSat)
		}
		t.Logf("admitted %d, denied %d, reserved %d, Saturation up to %.3f", a, d, r, maxSat)
	})
}
