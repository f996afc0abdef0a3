package bucket

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit10StandsRandomScript: A = TryUpdateAt(t0, x, n, max) CASes its
// entry and is held before its validation; inside the hook a seeded
// script of other keys' operations runs at increasing times after t0:
// Updates (moving the lines' time by short and long steps), TryReserves
// and Refunds of them (undos of other keys' writes), with more keys than
// slots (evictions, floors). A then validates (its write stands, or is
// undone and decided again at the lines' time). Afterwards the script
// continues at later times. Every key, x included, must read at least
// its exact debt (linear stamps, each write at its own time, a refund
// restoring the key's stamp before the refunded write) at every check;
// and where neither line has a floor, at most that plus a ms of drain
// (no phantom).
func TestAudit10StandsRandomScript(t *testing.T) {
	type lawC struct {
		name      string
		rate, max float64
		steps     []int64 // ms steps to pick from
	}
	laws := []lawC{
		{"2000x60", 2000, 60, []int64{0, 1, 1, 2, 3, 5, 8, 20, 40}},
		{"1000x60", 1000, 60, []int64{0, 1, 2, 3, 4, 6, 10, 30, 70}},
		{"10x40", 10, 40, []int64{0, 1, 50, 300, 400, 1000, 4000, 9000}},
	}
	for _, lw := range laws {
		for seed := range uint64(150) {
			t.Run(fmt.Sprintf("%s/seed%d", lw.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				e := newTest(t, 2, Linear(lw.rate, lw.max), clk)
				t0 := clk.Now()
				clk.Advance(1000 * time.Hour)
				r := lw.rate / 1000 // tokens per ms
				nkeys := 10 + rng.IntN(30)
				keys := a10Others(e, "x", nkeys, "z")
				S := map[string]float64{} // stamp in tokens: load at ms m is max(0, S - m*r)
				type rc struct {
					key  string
					prev float64
					rc   Receipt
				}
				var rcs []rc
				cur := int64(0)
				write := func(k string, n float64, at int64) {
					S[k] = min(max(S[k], float64(at)*r)+n, float64(at)*r+lw.max)
				}
				step := func(nops int) {
					for range nops {
						cur += lw.steps[rng.IntN(len(lw.steps))]
						at := t0.Add(time.Duration(cur) * time.Millisecond)
						k := keys[rng.IntN(len(keys))]
						n := float64(1 + rng.IntN(int(lw.max/4)))
						switch rng.IntN(4) {
						case 0, 1:
							e.UpdateAt(at, k, n)
							write(k, n, cur)
						case 2:
							prev := S[k]
							if c, ok := e.TryReserveAt(at, k, n, lw.max); ok {
								write(k, n, cur)
								rcs = append(rcs, rc{k, prev, c})
							}
						case 3:
							if len(rcs) > 0 {
								i := rng.IntN(len(rcs))
								c := rcs[i]
								rcs = append(rcs[:i], rcs[i+1:]...)
								if e.Refund(&c.rc) {
									S[c.key] = c.prev
								}
							}
						}
					}
				}
				n := float64(1 + rng.IntN(int(lw.max/2)))
				var inHook atomic.Bool
				cas := 0
				e.setHooks(&testHooks{afterCAS: func() {
					if !inHook.CompareAndSwap(false, true) {
						return
					}
					defer inHook.Store(false)
					cas++
					if cas == 1 {
						step(1 + rng.IntN(12))
					}
				}})
				if !e.TryUpdateAt(t0, "x", n, lw.max) {
					t.Fatal("A denied (x owed 0)")
				}
				e.setHooks(nil)
				t.Logf("A: %d CASes, n %v, lines' time t0+%d ms", cas, n, cur)
				if cas == 1 {
					S["x"] = n
				} else {
					S["x"] = float64(cur)*r + n // decided again at the lines' time
				}
				// Refunds after A must not touch x; stale receipts of the
				// script may still refund (the model follows them).
				check := func() {
					at := t0.Add(time.Duration(cur) * time.Millisecond)
					noFloor := StateOf(e, 0).Floor == 0 && StateOf(e, 1).Floor == 0
					for _, k := range append([]string{"x"}, keys...) {
						truth := max(0, S[k]-float64(cur)*r)
						q := e.QueryAt(at, k)
						if q < truth-1e-9 {
							t.Fatalf("%s reads %v at t0+%d ms, below its debt %v (A's CASes %d)", k, q, cur, truth, cas)
						}
						if k == "x" && noFloor && q > truth+r+1e-9 {
							t.Fatalf("x reads %v at t0+%d ms, above its debt %v: a phantom (A's CASes %d)", q, cur, truth, cas)
						}
					}
				}
				check()
				for range 6 {
					step(1 + rng.IntN(8))
					check()
				}
			})
		}
	}
}
