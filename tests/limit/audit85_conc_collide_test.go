package limit_test

// Audit 85 (concurrency): many keys that all collide in a tiny limiter,
// racing under several policies (the Limiter's own, flipped by SetLimit
// and SetBurst during the race, and two Tiers), with reservations
// cancelled while others race, on both engines, at GOMAXPROCS 1, 2, 4, 8,
// with the clock frozen during a round or moving under it.
//
// limit/doc.go, "Error side": "A key's read debt is at least its own debt
// on either engine ... So a collision can only deny a key early, never
// admit it past its own limit"; "Tiers and changing the limit": "every
// policy of the limiter sees the same debt", "SetLimit and SetBurst
// replace the Limiter's own policy whole (one pointer: a decision racing
// them uses the old policy or the new one, never a mix)"; "Reservations
// of any policy queue up to the limiter's MaxDebt"; Reservation.Cancel:
// "a key is never given back more than its own reservation, nor anything
// of another key's". "Under contention on one key, strict decisions never
// admit past the burst on either engine."
//
// The invariants, in time form (ms of drain at the limiter's rate: a
// token of rate r costs 1000/r ms, a burst b of it b x 1000/r ms), per key
// and round, every round starting with every key drained (the clock moves
// past MaxDebt's drain between rounds):
//   - the Allow-type admissions (Tier.Allow, Tier.DecideN, Limiter.DecideN)
//     sum to at most the largest burst of any policy in force during the
//     round, plus the time the clock moved during it;
//   - those and the reservations not cancelled sum to at most MaxDebt's
//     time plus that;
//   - at the end the key reads at least that sum, less the time moved.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit85ConcCollidingPoliciesRace(t *testing.T) {
	tiny := map[limit.Engine][]limit.Option{
		limit.Buckets:  {limit.WithEngine(limit.Buckets), limit.WithCapacity(2, 0.5)},
		limit.CountMin: {limit.WithSize(2, 3)},
	}
	for _, e := range audit85concEngines {
		for _, moving := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/moving=%v", e, moving), func(t *testing.T) {
				sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
					for _, nkeys := range []int{1, 5, 48} {
						audit85concCollide(t, tiny[e], moving, nkeys)
					}
				})
			})
		}
	}
}

type audit85concKeyAcc struct {
	allowMs   atomic.Int64 // Allow-type admissions
	reserveMs atomic.Int64 // reservations admitted and not cancelled
}

func audit85concCollide(t *testing.T, engOpts []limit.Option, moving bool, nkeys int) {
	const (
		workers = 6
		rounds  = 4
		ops     = 100
		maxDebt = 12 // tokens of 10/s: 1200 ms
	)
	fc := sketchtest.NewFakeClock()
	fc.Set(1 << 32)
	l, err := limit.New(10, 4, append([]limit.Option{limit.WithClock(fc), limit.WithSeed(85), limit.WithMaxDebt(maxDebt)}, engOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() {
		t.Fatal("setup: limiter not exact")
	}
	half, err := l.Tier("half", 5, 2) // 200 ms a token, burst 400 ms
	if err != nil {
		t.Fatal(err)
	}
	dbl, err := l.Tier("double", 20, 6) // 50 ms a token, burst 300 ms
	if err != nil {
		t.Fatal(err)
	}
	if !half.Exact() || !dbl.Exact() {
		t.Fatal("setup: tiers not exact")
	}
	tiers := []*limit.Tier{half, dbl}
	type pol struct {
		r limit.Limit
		b int
	}
	// every burst at most 400 ms, and so every intermediate policy (below)
	flips := []pol{{10, 4}, {5, 2}, {20, 6}, {20, 8}, {10, 2}, {20, 1}}
	const maxDebtMs = maxDebt * 100
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("c%d", i)
	}
	for round := 0; round < rounds; round++ {
		fc.Advance(2 * maxDebtMs * time.Millisecond) // every key drained
		if err := l.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		if err := l.SetBurst(4); err != nil {
			t.Fatal(err)
		}
		start := fc.NowMillis()
		acc := make([]audit85concKeyAcc, nkeys)
		var maxBurstMs atomic.Int64
		maxBurstMs.Store(400) // New's 4 at 10/s; tiers: 400, 300
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var aux sync.WaitGroup
		// the flipper: SetLimit / SetBurst while the racers run; a policy
		// counts in the bound from before it is set
		aux.Add(1)
		go func() {
			defer aux.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := flips[i%len(flips)]
				// a larger burst: the limit first; a smaller one: the burst
				// first, so that the policy in between, (new limit, old burst)
				// or (old limit, new burst), has a burst of at most the larger
				// of the two's time; each counts in the bound before it is set
				cur := pol{l.Limit(), l.Burst()}
				mid := pol{p.r, cur.b}
				if p.b < cur.b {
					mid = pol{cur.r, p.b}
				}
				for _, c := range []pol{mid, p} {
					ms := int64(float64(c.b) * 1000 / float64(c.r))
					for {
						old := maxBurstMs.Load()
						if ms <= old || maxBurstMs.CompareAndSwap(old, ms) {
							break
						}
					}
				}
				if p.b < cur.b {
					if err := l.SetBurst(p.b); err != nil {
						t.Errorf("SetBurst(%d): %v", p.b, err)
						return
					}
				}
				if err := l.SetLimit(p.r); err != nil {
					t.Errorf("SetLimit(%v): %v", p.r, err)
					return
				}
				if err := l.SetBurst(p.b); err != nil {
					t.Errorf("SetBurst(%d): %v", p.b, err)
					return
				}
			}
		}()
		if moving {
			aux.Add(1)
			go func() {
				defer aux.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					fc.Advance(time.Millisecond)
					time.Sleep(50 * time.Microsecond)
				}
			}()
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				var held []*limit.Reservation
				var heldKey []int
				var heldMs []int64
				for i := 0; i < ops; i++ {
					k := rng.IntN(nkeys)
					key := keys[k]
					n := 1 + rng.IntN(2)
					now := fc.Now().Add(time.Hour) // a future t counts as the clock's reading
					switch rng.IntN(6) {
					case 0, 1:
						tr := tiers[rng.IntN(2)]
						if tr.AllowN(now, key, n) {
							acc[k].allowMs.Add(int64(n) * int64(1000/float64(tr.Limit())))
						}
					case 2:
						tr := tiers[rng.IntN(2)]
						if d := tr.DecideN(now, key, n); d.Allowed {
							acc[k].allowMs.Add(int64(n) * int64(1000/float64(tr.Limit())))
						}
					case 3:
						d := l.DecideN(now, key, n)
						if d.Allowed {
							acc[k].allowMs.Add(int64(n) * int64(1000/float64(d.Limit)))
						}
					case 4:
						tr := tiers[rng.IntN(2)]
						r := tr.ReserveN(now, key, n)
						if r.OK() {
							ms := int64(n) * int64(1000/float64(tr.Limit()))
							acc[k].reserveMs.Add(ms)
							held = append(held, r)
							heldKey = append(heldKey, k)
							heldMs = append(heldMs, ms)
						}
					case 5:
						if len(held) > 0 {
							j := rng.IntN(len(held))
							held[j].Cancel()
							acc[heldKey[j]].reserveMs.Add(-heldMs[j])
							held = append(held[:j], held[j+1:]...)
							heldKey = append(heldKey[:j], heldKey[j+1:]...)
							heldMs = append(heldMs[:j], heldMs[j+1:]...)
						}
					}
				}
			}(w)
		}
		wg.Wait()
		close(stop)
		aux.Wait()
		end := fc.NowMillis()
		moved := end - start
		bmax := maxBurstMs.Load()
		if os.Getenv("A85DEBUG") != "" {
			best := int64(0)
			for k := range keys {
				best = max(best, acc[k].allowMs.Load())
			}
			t.Logf("nkeys %d round %d: most admitted %d ms, bound %d+%d", nkeys, round, best, bmax, moved)
		}
		for k, key := range keys {
			a, r := acc[k].allowMs.Load(), acc[k].reserveMs.Load()
			if a > bmax+moved {
				t.Errorf("round %d key %s: Allow-type admissions sum to %d ms, above the largest burst in force %d ms plus %d ms moved: admitted past its own limit", round, key, a, bmax, moved)
			}
			if a+r > maxDebtMs+moved {
				t.Errorf("round %d key %s: admissions and live reservations sum to %d ms, above MaxDebt's %d ms plus %d ms moved", round, key, a+r, maxDebtMs, moved)
			}
			// read back in the tier "double" (20/s: 50 ms a token), exact
			tok := dbl.TokensAt(fc.Now(), key)
			debtMs := (6 - tok) * 50
			if want := float64(a + r - moved); debtMs < want-1e-6 {
				t.Errorf("round %d key %s: reads %v ms of debt, below its own %d ms admitted and not cancelled (less %d ms moved): a collision, a racing Cancel or a policy change took debt below the truth", round, key, debtMs, a+r, moved)
			}
			if math.IsNaN(tok) {
				t.Fatalf("NaN tokens")
			}
		}
	}
}
