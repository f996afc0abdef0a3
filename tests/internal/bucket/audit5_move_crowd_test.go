package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveOneSidedCrowded: one-sidedness while lines move, on a
// crowded table. 48 keys in 2 or 3 lines (evictions, floors, shared
// fingerprints all happen), 8 goroutines, time frozen in a phase and
// moved between phases by gaps around the slack (to an hour). Each
// goroutine mixes TryUpdate, TryUpdateAndQueryAt, Update,
// UpdateAndQueryAt, and TryReserveAt refunded in the same phase; the
// true debt of a key is its drained debt at the phase's start plus
// everything admitted or added in the phase and not refunded, clamped at
// Max (all at one time, so the order does not matter). bucket/doc.go:
// "One-sided: Query(k) >= k's true load, whatever evictions, floors,
// fingerprint collisions, decay, refunds and races; a key at its limit
// is never admitted early." Checked: every Query during a phase reads at
// least the key's true debt at the phase's start; at the phase's end
// every key reads at least its true debt, and every key that has never
// been admitted past its limit: no admission made a key's true debt
// exceed its limit (the tokens admitted by its TryUpdate forms, and its
// reservations kept, fit on top of its debt at the phase's start).
func TestAudit5MoveOneSidedCrowded(t *testing.T) {
	a5Procs(t, func(t *testing.T) {
		for ci, c := range a5Cfgs[:2] { // requests of 1 token
			for _, lines := range []int{2, 3} {
				L := a5LawOf(t, c.law)
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 34)
				seed := uint64(500 + 10*ci + lines)
				e := a5Engine(t, lines, c.law, clk, seed)
				keys := make([]string, 48)
				for i := range keys {
					keys[i] = fmt.Sprintf("crowd-%d", i)
				}
				lim := func(k int) uint64 { return c.limit - uint64(k%4) }
				truth := make([]uint64, len(keys)) // ticks, at the phase's time
				for p := range reps(40, 10) {
					X := clk.Now()
					var add [48]atomic.Int64    // tokens admitted or added, not refunded
					var tryAdm [48]atomic.Int64 // tokens admitted by TryUpdate forms (each within the limit)
					var mu sync.Mutex
					var bad []string
					race(8, 1, func(g, _ int) bool {
						rng := rand.New(rand.NewPCG(seed, uint64(p*8+g)))
						for range 50 {
							k := rng.IntN(len(keys))
							n := uint64(1 + rng.IntN(3))
							nf := float64(n)
							switch rng.IntN(6) {
							case 0:
								if e.TryUpdate(keys[k], nf, float64(lim(k))) {
									add[k].Add(int64(n))
									tryAdm[k].Add(int64(n))
								}
							case 1:
								if ok, _ := e.TryUpdateAndQueryAt(X, keys[k], nf, float64(lim(k))); ok {
									add[k].Add(int64(n))
									tryAdm[k].Add(int64(n))
								}
							case 2:
								e.Update(keys[k], nf)
								add[k].Add(int64(n))
							case 3:
								v := e.UpdateAndQueryAt(X, keys[k], nf)
								if w := L.val(min(truth[k]+n*L.u, L.span)); v < w {
									mu.Lock()
									bad = append(bad, fmt.Sprintf("UpdateAndQuery(key %d, %d) returned %v, below %v", k, n, v, w))
									mu.Unlock()
								}
								add[k].Add(int64(n))
							case 4:
								rc, ok := e.TryReserveAt(X, keys[k], nf, float64(lim(k)))
								if ok && !e.Refund(&rc) {
									add[k].Add(int64(n)) // kept: part of the truth
									tryAdm[k].Add(int64(n))
								}
							case 5:
								if v, w := e.QueryAt(X, keys[k]), L.val(truth[k]); v < w {
									mu.Lock()
									bad = append(bad, fmt.Sprintf("QueryAt(key %d) read %v during the phase, below its true debt %v at the phase's start", k, v, w))
									mu.Unlock()
								}
							}
						}
						return false
					})
					for k, key := range keys {
						if a := uint64(tryAdm[k].Load()); a > 0 && truth[k]+a*L.u > lim(k)*L.u {
							bad = append(bad, fmt.Sprintf("key %d admitted %d tokens from a true debt of %v: past its limit %d", k, a, L.val(truth[k]), lim(k)))
						}
						truth[k] = min(truth[k]+uint64(add[k].Load())*L.u, L.span)
						if v, w := e.QueryAt(X, key), L.val(truth[k]); v < w {
							bad = append(bad, fmt.Sprintf("key %d reads %v after the phase, below its true debt %v", k, v, w))
						}
					}
					if len(bad) > 0 {
						t.Fatalf("%v lines %d phase %d (after a gap of %v): %s", c.law, lines, p, c.gaps[(p+len(c.gaps)-1)%len(c.gaps)], strings.Join(bad, "; "))
					}
					gap := c.gaps[p%len(c.gaps)]
					clk.Advance(gap)
					for k := range truth {
						truth[k] = L.drain(truth[k], gap.Milliseconds())
					}
				}
			}
		}
	})
}
