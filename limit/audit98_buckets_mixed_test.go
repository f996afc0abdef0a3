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

// a98bkPol is a policy in ms of drain of New(10, ...)'s rate: a token
// costs cost ms, the burst is burst ms.
type a98bkPol struct{ cost, burst int64 }

// a98bkLow is a lower bound on one key's true debt, in ms of drain: what
// its own exact bucket owes at least, given the requests the limiter
// admitted and charged for it. Every step keeps it a lower bound: an
// admission of c adds c (the truth adds c to a debt at least as large),
// a denial adds the RejectCost up to MaxDebt, a Cancel of a take of c
// gives back at most c (the bucket "as if the reservation had never been
// taken" owes at least debt - c), and the debt drains 1 ms a ms.
type a98bkLow struct{ d, at int64 }

func (o *a98bkLow) drain(now int64) {
	if now > o.at {
		o.d = max(0, o.d-(now-o.at))
		o.at = now
	}
}

// TestAudit98BucketsMixedOpsFullTableOneSided drives a tiny Buckets
// limiter (WithCapacity(24, 0.01)) far past its capacity with 200 keys,
// on one goroutine with a fake clock that moves forward by 0..150 ms and
// sometimes steps back by up to 3 s, mixing every writing path of the
// package on the one table: DecideN of the limiter's own policy (changed
// at run time by SetLimit and SetBurst), DecideN of two Tiers, ReserveN of
// each and Cancel of some reservations later, all under WithRejectCost(1).
// Each key's own exact bucket is followed as a lower bound on its debt
// (a98bkLow); then, whatever evictions, floors and fingerprint twins did
// to the table:
//
//   - no admission is one the key's own bucket denies, and no reservation
//     is given a time to act earlier than its own bucket's (limit/doc.go,
//     "Error side": "a collision can only deny a key early, never admit it
//     past its own limit" and "The durations of a Decision and a
//     Reservation ... are ... only late, never early, under collisions";
//     internal/bucket/doc.go: "a key at its limit is never admitted
//     early", "whatever evictions, floors, fingerprint collisions, decay,
//     refunds and races");
//   - a denial's RetryAfter is never before the key's own bucket would
//     admit (same sentences), Remaining and TokensAt never above its own
//     bucket's;
//   - the table was full (fresh keys denied by floors along the way).
func TestAudit98BucketsMixedOpsFullTableOneSided(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		clk := limittest.NewFakeClock()
		clk.Set(1_800_000_000_000)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(seed), limit.WithCapacity(24, 0.01),
			limit.WithMaxDebt(80), limit.WithRejectCost(1), limit.WithEngine(limit.Buckets))
		if err != nil {
			t.Fatal(err)
		}
		half, err := l.Tier("half", 5, 10) // 200 ms a token, 2000 ms of burst
		if err != nil {
			t.Fatal(err)
		}
		slow, err := l.Tier("slow", 2.5, 20) // 400 ms a token, 8000 ms of burst
		if err != nil {
			t.Fatal(err)
		}
		if !half.Exact() || !slow.Exact() || !l.Exact() {
			t.Fatalf("seed %d: tiers or limiter not exact", seed)
		}
		const keys = 200
		const maxDebt = 8000
		own := a98bkPol{100, 2000}
		type pending struct {
			key  int
			cost int64
			r    *limit.Reservation
		}
		var open []pending
		low := make([]a98bkLow, keys)
		hw := clk.NowMillis()
		for i := range low {
			low[i].at = hw
		}
		rng := rand.New(rand.NewPCG(seed, 98))
		key := func(i int) string { return fmt.Sprintf("u%d-%d", seed, i) }
		var admitted, denied, reserved, cancelled, freshDenied int
		for step := range 6000 {
			if rng.IntN(40) == 0 {
				clk.Set(clk.NowMillis() - int64(rng.IntN(3000))) // a step back
			} else {
				clk.Advance(time.Duration(rng.IntN(151)) * time.Millisecond)
			}
			now := l.Now()                // observed: the limiter's time is at least this from now on
			hw = max(hw, now.UnixMilli()) // the time every call decides at
			switch rng.IntN(60) {
			case 0: // the limiter's own policy changes
				if rng.IntN(2) == 0 {
					r := []limit.Limit{10, 5, 2.5}[rng.IntN(3)]
					if err := l.SetLimit(r); err != nil {
						continue // a burst the new rate cannot hold under MaxDebt
					}
				} else if err := l.SetBurst(1 + rng.IntN(20)); err != nil {
					continue
				}
				c := int64(math.Round(1000 / float64(l.Limit())))
				own = a98bkPol{c, c * int64(l.Burst())}
				continue
			case 1: // a fresh key: denied only by what others left
				if !l.Peek(fmt.Sprintf("fresh%d-%d", seed, step)).Allowed {
					freshDenied++
				}
				continue
			}
			i := rng.IntN(keys)
			o := &low[i]
			o.drain(hw)
			n := 1 + rng.IntN(10)
			var pol a98bkPol
			var decide func() limit.Decision
			var reserve func() *limit.Reservation
			var tokens func() float64
			switch rng.IntN(3) {
			case 0:
				pol = own
				decide = func() limit.Decision { return l.DecideN(now, key(i), n) }
				reserve = func() *limit.Reservation { return l.ReserveN(now, key(i), n) }
				tokens = func() float64 { return l.TokensAt(now, key(i)) }
			case 1:
				pol = a98bkPol{200, 2000}
				decide = func() limit.Decision { return half.DecideN(now, key(i), n) }
				reserve = func() *limit.Reservation { return half.ReserveN(now, key(i), n) }
				tokens = func() float64 { return half.TokensAt(now, key(i)) }
			default:
				pol = a98bkPol{400, 8000}
				decide = func() limit.Decision { return slow.DecideN(now, key(i), n) }
				reserve = func() *limit.Reservation { return slow.ReserveN(now, key(i), n) }
				tokens = func() float64 { return slow.TokensAt(now, key(i)) }
			}
			cost := int64(n) * pol.cost
			if cost > pol.burst {
				continue // never admitted: not this test's case
			}
			if tk, hi := tokens(), float64(pol.burst-o.d)/float64(pol.cost); tk > hi+1e-9 {
				t.Fatalf("seed %d step %d: key %d reads %v tokens; its own bucket (debt >= %d ms, %v) has at most %v", seed, step, i, tk, o.d, pol, hi)
			}
			switch rng.IntN(5) {
			case 0, 1, 2:
				d := decide()
				if d.Allowed {
					admitted++
					if o.d+cost > pol.burst {
						t.Fatalf("seed %d step %d: key %d admitted %d tokens (%d ms) of %v; its own bucket owes >= %d ms", seed, step, i, n, cost, pol, o.d)
					}
					o.d += cost
					continue
				}
				denied++
				if wait := o.d + cost - pol.burst; d.RetryAfter < time.Duration(wait)*time.Millisecond {
					t.Fatalf("seed %d step %d: key %d denied %d tokens of %v with RetryAfter %v; its own bucket (debt >= %d ms) needs >= %d ms", seed, step, i, n, pol, d.RetryAfter, o.d, wait)
				}
				if hi := (pol.burst - o.d) / pol.cost; int64(d.Remaining) > max(hi, 0) {
					t.Fatalf("seed %d step %d: key %d denied with Remaining %d; its own bucket has at most %d", seed, step, i, d.Remaining, hi)
				}
				rej := pol.cost // RejectCost 1, in the policy's tokens
				o.d = min(o.d+rej, maxDebt)
			default:
				r := reserve()
				if !r.OK() {
					continue
				}
				reserved++
				if o.d+cost > maxDebt {
					t.Fatalf("seed %d step %d: key %d reserved %d ms past MaxDebt (debt >= %d ms)", seed, step, i, cost, o.d)
				}
				want := max(0, o.d+cost-pol.burst)
				if got := r.DelayFrom(time.UnixMilli(hw)); got < time.Duration(want)*time.Millisecond {
					t.Fatalf("seed %d step %d: key %d reservation of %d ms (%v) acts %v after the decision; its own bucket (debt >= %d ms) needs %d ms", seed, step, i, cost, pol, got, o.d, want)
				}
				o.d += cost
				open = append(open, pending{i, cost, r})
			}
			if len(open) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(open))
				p := open[k]
				open = append(open[:k], open[k+1:]...)
				p.r.Cancel()
				cancelled++
				lo := &low[p.key]
				lo.drain(hw)
				lo.d = max(0, lo.d-p.cost)
			}
		}
		if admitted < 1000 || denied < 500 || reserved < 300 || cancelled < 100 || freshDenied < 10 {
			t.Fatalf("seed %d: admitted %d, denied %d, reserved %d, cancelled %d, fresh keys denied %d: the run did not exercise a full table", seed, admitted, denied, reserved, cancelled, freshDenied)
		}
		t.Logf("seed %d: admitted %d, denied %d, reserved %d, cancelled %d, fresh denied %d; Stats %+v", seed, admitted, denied, reserved, cancelled, freshDenied, l.Stats())
	}
}
