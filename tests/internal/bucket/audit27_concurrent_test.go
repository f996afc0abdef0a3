package bucket_test

// audit27: the one-sided guarantee and "never over-admits" under
// concurrency, with colliding fingerprints, churn past capacity and a
// fake clock frozen within each phase and stepped (back, by residue
// wraps, by hours and days) between phases, at GOMAXPROCS 1, 2 and 4.

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit27ConcurrentChurnOneSided: 6 goroutines race TryUpdate,
// TryReserve/Refund and Update (one goroutine: the merge path) on 120 keys (a third of them on 2 fingerprints) in 5
// lines; 2 more Query keys throughout. Within a phase the clock is
// frozen, so every operation of the phase is at one tick and a key's
// true stamp after it is min(max(before, t) + added - refunded, t + Max)
// (at one tick the adds and the clamp commute). Checked: during the phase, every read is at
// least the key's truth at the phase's start; after it, at least the
// truth; and a key's admissions never exceed the limit.
func TestAudit27ConcurrentChurnOneSided(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		for _, L := range a27Laws[:3] {
			t.Run(fmt.Sprintf("P%d/%s", procs, L.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				a27ConcurrentChurn(t, L.law, int64(procs))
			})
		}
	}
}

func a27ConcurrentChurn(t *testing.T, law bucket.Law, seed int64) {
	const nkeys, lines, writers, readers, phases, perPhase = 120, 5, 6, 2, 30, 150
	hs := a27Colliding(nkeys, 2700+uint64(seed))
	clk := sketchtest.NewFakeClock()
	clk.Set(9_000_000)
	e, u, g, ok := a27Engine(t, lines, law, a27Factory(hs), clk)
	if !ok {
		t.Skip("ticks longer than a millisecond")
	}
	span := e.Quantum().Span
	limTok := span / u * 3 / 4
	lim := float64(limTok)
	limTicks := limTok * u
	truth := make([]uint64, nkeys)
	rng := rand.New(rand.NewPCG(uint64(seed), 27))
	var admitted, refunded [nkeys]atomic.Uint64
	var updated [nkeys]atomic.Bool // an Update wrote the key in this phase
	var fails atomic.Int64
	var msg atomic.Value
	fail := func(s string) {
		if fails.Add(1) == 1 {
			msg.Store(s)
		}
	}
	for ph := 0; ph < phases; ph++ {
		a27Step(rng, clk, g, span)
		ms := bucket.NowMs(e)
		tick := ms*g + a27TickBase
		base := make([]float64, nkeys) // truth at the phase's start, in tokens
		for k := range nkeys {
			if truth[k] > tick {
				base[k] = float64(truth[k]-tick) / float64(u)
			}
			admitted[k].Store(0)
			refunded[k].Store(0)
			updated[k].Store(false)
		}
		var stop atomic.Bool
		var wg, rg sync.WaitGroup
		for r := range readers {
			rg.Go(func() {
				rr := rand.New(rand.NewPCG(uint64(ph), uint64(r)))
				for !stop.Load() {
					k := rr.IntN(nkeys)
					if got := e.Query(a27Key(k)); got < base[k]-1e-9 {
						fail(fmt.Sprintf("phase %d: a concurrent Query of key %d read %v below its debt at the phase's start %v", ph, k, got, base[k]))
					}
					runtime.Gosched()
				}
			})
		}
		for w := range writers {
			wg.Go(func() {
				wr := rand.New(rand.NewPCG(uint64(ph)*31+uint64(w), uint64(seed)))
				for range perPhase {
					k := wr.IntN(nkeys)
					n := uint64(1 + wr.IntN(3))
					if w == writers-1 {
						// Unconditional: may take a key past the limit (clamped at Max).
						e.Update(a27Key(k), float64(n))
						admitted[k].Add(n * u)
						updated[k].Store(true)
						continue
					}
					if w%2 == 0 {
						if e.TryUpdate(a27Key(k), float64(n), lim) {
							admitted[k].Add(n * u)
						}
						continue
					}
					rc, ok := e.TryReserve(a27Key(k), float64(n), lim)
					if !ok {
						continue
					}
					admitted[k].Add(n * u)
					if wr.IntN(2) == 0 {
						runtime.Gosched()
						if e.Refund(&rc) {
							refunded[k].Add(n * u)
						}
					}
				}
			})
		}
		wg.Wait()
		stop.Store(true)
		rg.Wait()
		if fails.Load() > 0 {
			t.Fatalf("%d failures; first: %v", fails.Load(), msg.Load())
		}
		for k := range nkeys {
			debt := uint64(0)
			if truth[k] > tick {
				debt = truth[k] - tick
			}
			a, r := admitted[k].Load(), refunded[k].Load()
			if debt+a > limTicks && a > 0 && debt <= limTicks && !updated[k].Load() {
				// Admissions of the phase (refunded or not) each decided on
				// the admitted total before it: more than the limit's room
				// is an over-admission unless refunds made room between.
				if debt+a-r > limTicks {
					t.Fatalf("phase %d: key %d owed %d ticks, admitted %d, refunded %d: past the limit %d", ph, k, debt, a, r, limTicks)
				}
			}
			if a > 0 {
				// All at one tick, adds and the clamp commute.
				truth[k] = min(max(truth[k], tick)+a-r, tick+span)
			}
			want := float64(0)
			if truth[k] > tick {
				want = float64(truth[k]-tick) / float64(u)
			}
			if got := e.Query(a27Key(k)); got < want-1e-9 {
				t.Fatalf("phase %d (ms %d): key %d reads %v below its true debt %v (admitted %d, refunded %d ticks)", ph, ms, k, got, want, a, r)
			}
		}
	}
}
