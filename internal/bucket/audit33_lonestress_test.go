package bucket

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit33LoneKeysRefundsMovesStress: lone keys (one goroutine each,
// distinct fingerprints, no evictions: 8 keys in 2 lines of 14 slots)
// run TryReserve/Refund, TryUpdate and Query at times from a shared
// counter, some lagging, while two movers write other keys with jumps of
// 5 to 200 ms (long moves into later epochs, seals). Laws of one token a
// ms with a slack of 2 ms and 4 ms. Each key's truth is bracketed: lo
// (its writes at their own times) and hi (at the latest time issued when
// the write returned). Checked: every reading lies in [lo at the latest
// time, hi at its own time] (no phantom, never below the truth); a
// TryUpdate/TryReserve whose hi load fits is admitted (a key alone in
// its lines is never denied: its own operations are sequential, so the
// racing-insert cases cannot arise); none admitted past the limit (lo).
func TestAudit33LoneKeysRefundsMovesStress(t *testing.T) {
	for _, law := range []Law{Linear(1000, 30), Linear(1000, 60)} {
		t.Run(fmt.Sprintf("%v", law.Max), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) { a33LoneStress(t, law, 6) })
		})
	}
}

// TestAudit33CrowdedRefundsMovesStress: the same with 30 keys in the two
// lines (evictions, floors, fingerprint twins possible): only the
// one-sided checks apply (no reading below lo at the latest time, no
// admission past the limit).
func TestAudit33CrowdedRefundsMovesStress(t *testing.T) {
	for _, law := range []Law{Linear(1000, 30), Linear(1000, 60)} {
		t.Run(fmt.Sprintf("%v", law.Max), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) { a33LoneStress(t, law, 30) })
		})
	}
}

// a33LoneStress runs own keys, one goroutine each, and two movers; with
// more than 6 own keys the table overflows and only the one-sided checks
// apply.
func a33LoneStress(t *testing.T, law Law, own int) {
	crowded := own > 6
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, law, clk)
	clk.Set(1_000_000 + 1<<40) // never clamps a t
	var ks []string
	if crowded {
		for i := range own + 2 {
			ks = append(ks, fmt.Sprintf("crowd%d", i))
		}
	} else {
		ks = a33Keys(t, e, own+2, -1)
	}
	var now atomic.Int64 // ms after the engine's epoch
	now.Store(1)
	tm := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	const lim, rounds = 25.0, 4000
	var wg sync.WaitGroup
	var fails, refunds, admits, denies atomic.Int32
	report := func(format string, args ...any) {
		if fails.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}
	for g := 0; g < 2; g++ {
		mk := ks[own+g]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range rounds / 2 {
				d := int64(r.IntN(3))
				if r.IntN(8) == 0 {
					d = 5 + int64(r.IntN(196))
				}
				ms := now.Add(d)
				e.UpdateAt(tm(ms), mk, float64(1+r.IntN(3)))
			}
		})
	}
	for g := 0; g < own; g++ {
		key := ks[g]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 11))
			lo, hi := 0.0, 0.0 // stamps in ms (one token a ms)
			for range rounds * 6 / own {
				ms := now.Add(int64(r.IntN(2)))
				if r.IntN(4) == 0 {
					ms -= int64(r.IntN(4)) // a lagging caller
				}
				at := tm(ms)
				hiLoad := math.Max(hi-float64(ms), 0)
				n := float64(1 + r.IntN(3))
				if r.IntN(4) == 0 {
					n = float64(8 + r.IntN(8)) // a refund of it goes in steps
				}
				switch r.IntN(3) {
				case 0:
					got := e.QueryAt(at, key)
					tmax := float64(now.Load())
					if !crowded && got > hiLoad+1e-9 || got < math.Max(lo-tmax, 0)-1e-9 {
						report("%s reads %v at %d, want within [%v, %v]", key, got, ms, math.Max(lo-tmax, 0), hiLoad)
					}
				case 1:
					ok := e.TryUpdateAt(at, key, n, lim)
					tmax := float64(now.Load())
					if !crowded && !ok && hiLoad+n <= lim {
						report("%s denied %v at %d with a load of at most %v (limit %v)", key, n, ms, hiLoad, lim)
					}
					if !ok {
						denies.Add(1)
					}
					if ok {
						admits.Add(1)
						if math.Max(lo-tmax, 0)+n > lim+1e-9 {
							report("%s admitted %v past %v (load at least %v)", key, n, lim, math.Max(lo-tmax, 0))
						}
						lo = math.Max(lo, float64(ms)) + n
						hi = math.Max(hi, tmax) + n
					}
				case 2:
					rc, ok := e.TryReserveAt(at, key, n, lim)
					tmax := float64(now.Load())
					if !crowded && !ok && hiLoad+n <= lim {
						report("%s reservation of %v denied at %d with a load of at most %v", key, n, ms, hiLoad)
					}
					if !ok {
						continue
					}
					plo, phi := lo, hi
					lo = math.Max(lo, float64(ms)) + n
					hi = math.Max(hi, tmax) + n
					if r.IntN(2) == 0 {
						now.Add(int64(r.IntN(3)))
						if e.Refund(&rc) {
							lo, hi = plo, phi
							refunds.Add(1)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("admitted %d, denied %d, refunds %d, lw %d ms", admits.Load(), denies.Load(), refunds.Load(), now.Load())
}
