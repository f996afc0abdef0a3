package bucket_test

// audit27: the one-sided guarantee while the clock moves during the
// races (a stepper goroutine: small steps, the slack, exact residue
// wraps, an hour), with colliding fingerprints and evictions. The truth
// is bounded below: a key's stamp never decreases (no refunds here) and
// after an admitted write made at a time of at least pre (the clock
// read before the call) it is at least pre's tick + the write's ticks;
// a read made at a time of at most post (the clock read after it) owes
// at least that bound less post's tick.

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

func TestAudit27MovingClockOneSided(t *testing.T) {
	for _, procs := range []int{2, 4} {
		for _, L := range a27Laws[:3] {
			t.Run(fmt.Sprintf("P%d/%s", procs, L.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				a27MovingClock(t, L.law, uint64(procs))
			})
		}
	}
}

func a27MovingClock(t *testing.T, law bucket.Law, seed uint64) {
	const nkeys, lines, writers, readers, phases, perPhase = 100, 4, 4, 2, 14, 200
	hs := a27Colliding(nkeys, 9100+seed)
	clk := sketchtest.NewFakeClock()
	clk.Set(2_000_000)
	e, u, g, ok := a27Engine(t, lines, law, a27Factory(hs), clk)
	if !ok {
		t.Skip("ticks longer than a ms")
	}
	span := e.Quantum().Span
	lim := float64(span/u) * 3 / 4
	tickNow := func() uint64 { return bucket.NowMs(e)*g + a27TickBase }
	var lower [nkeys]atomic.Uint64 // a lower bound of each key's true stamp
	var fails atomic.Int64
	var msg atomic.Value
	fail := func(s string) {
		if fails.Add(1) == 1 {
			msg.Store(s)
		}
	}
	slack := int64((1<<16 - 1 - span) / g)
	wrap := int64((1 << 16) / g)
	for ph := 0; ph < phases; ph++ {
		var stop atomic.Bool
		var wg, bg sync.WaitGroup
		bg.Go(func() { // the stepper
			r := rand.New(rand.NewPCG(seed, uint64(ph)))
			for !stop.Load() {
				switch r.IntN(8) {
				case 0:
					clk.Set(clk.NowMillis() + slack + 1)
				case 1:
					clk.Set(clk.NowMillis() + wrap)
				case 2:
					clk.Set(clk.NowMillis() - 100)
				default:
					clk.Set(clk.NowMillis() + 1)
				}
				runtime.Gosched()
			}
		})
		for r := range readers {
			bg.Go(func() {
				rr := rand.New(rand.NewPCG(uint64(ph)+seed, uint64(r)+7))
				for !stop.Load() {
					k := rr.IntN(nkeys)
					lb := lower[k].Load() // a bound established before the read started
					got := e.Query(a27Key(k))
					post := tickNow()
					if lb > post {
						if want := float64(lb-post) / float64(u); got < want-1e-9 {
							fail(fmt.Sprintf("phase %d: key %d read %v below its least true debt %v", ph, k, got, want))
						}
					}
				}
			})
		}
		for w := range writers {
			wg.Go(func() {
				wr := rand.New(rand.NewPCG(uint64(ph)*17+uint64(w), seed))
				for range perPhase {
					k := wr.IntN(nkeys)
					n := uint64(1 + wr.IntN(3))
					pre := tickNow()
					if e.TryUpdate(a27Key(k), float64(n), lim) {
						nb := pre + n*u
						for {
							cur := lower[k].Load()
							if nb <= cur || lower[k].CompareAndSwap(cur, nb) {
								break
							}
						}
					}
				}
			})
		}
		wg.Wait()
		stop.Store(true)
		bg.Wait()
		if fails.Load() > 0 {
			t.Fatalf("%d failures; first: %v", fails.Load(), msg.Load())
		}
		now := tickNow()
		for k := range nkeys {
			lb := lower[k].Load()
			want := float64(0)
			if lb > now {
				want = float64(lb-now) / float64(u)
			}
			if got := e.Query(a27Key(k)); got < want-1e-9 {
				t.Fatalf("phase %d: key %d reads %v below its least true debt %v", ph, k, got, want)
			}
		}
	}
}
