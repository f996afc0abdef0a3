package bucket

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit9TimeConflictUnbounded: A = TryUpdateAt(t0, x, 1, 10) on an
// engine of 2 lines. After each of A's entry CASes (the afterCAS hook,
// before its validation) another key's Update at a later ms lands on
// A's lines (run synchronously inside the hook), so A's validation finds
// only a moved time. The audit wrote it when such a conflict undid and
// decided again, without a bound (20 rounds, five times the old four):
// lock-free, not wait-free. Now A's entry, live at the line's time and
// not under a move, stands (docs/design.md, section 8, "Stale time"):
// one CAS, admitted, x reads exactly 1 less what drained, and every
// other key its own load.
func TestAudit9TimeConflictUnbounded(t *testing.T) {
	const rounds = 20
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	t0 := clk.Now()
	clk.Advance(time.Second) // every At time below is not ahead of the clock
	var cas, inHook atomic.Int32
	others := make([]string, rounds)
	for i := range others {
		others[i] = fmt.Sprintf("y%d", i)
	}
	e.setHooks(&testHooks{afterCAS: func() {
		if !inHook.CompareAndSwap(0, 1) {
			return
		}
		defer inHook.Store(0)
		r := int(cas.Add(1))
		if r <= rounds {
			e.UpdateAt(t0.Add(time.Duration(r)*time.Millisecond), others[r-1], 0.5)
		}
	}})
	ok := e.TryUpdateAt(t0, "x", 1, 10)
	e.setHooks(nil)
	if !ok {
		t.Fatalf("A denied after %d CASes: a time-only conflict should retry without a bound", cas.Load())
	}
	if got := cas.Load(); got != 1 {
		t.Fatalf("A made %d CASes, want 1 (its entry stands)", got)
	}
	at := t0.Add(time.Millisecond)
	if q := e.QueryAt(at, "x"); q < 1-0.02 || q > 1 {
		t.Fatalf("x reads %v at the other key's write's time, want 1 less 1 ms drain", q)
	}
	for _, k := range others[:1] {
		q := e.QueryAt(at, k)
		// k was written 0.5 at t0 + (i+1) ms; at most 19 ms drained (0.19).
		if q < 0.5-0.2 || q > 0.5+1e-9 && q != 1 {
			// 1: a fingerprint collision with x would read x's debt
			t.Fatalf("%s reads %v", k, q)
		}
	}
}

// TestAudit9TimeConflictStorm: G goroutines TryUpdateAt different keys
// (a handful, so they share the 2 lines, and some fingerprints
// collide) with times from a shared counter advancing 1 ms per call,
// so nearly every validation finds a moved time. Every call must
// return (a watchdog: no livelock), the mean number of entry CASes per
// call must stay small (no starvation storm), and each key's admitted
// tokens must not exceed burst + rate x (the span of times used).
func TestAudit9TimeConflictStorm(t *testing.T) {
	const G, per, keys = 8, 3000, 6
	for _, c := range []struct {
		name        string
		rate, burst float64
	}{{"nearLimit", 100, 20}, {"writing", 1000, 40}} {
		rate, burst := c.rate, c.burst
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s/P%d", c.name, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				e := newTest(t, 2, Linear(rate, 40), clk)
				base := clk.Now()
				clk.Advance(time.Hour)
				var cas atomic.Int64
				e.setHooks(&testHooks{afterCAS: func() { cas.Add(1) }})
				var tick atomic.Int64
				var admitted [keys]atomic.Int64
				var maxMs atomic.Int64
				var wg sync.WaitGroup
				done := make(chan struct{})
				for g := range G {
					wg.Go(func() {
						for i := range per {
							k := (g + i) % keys
							ms := tick.Add(1) / 4 // 4 calls per ms on average
							for {
								m := maxMs.Load()
								if ms <= m || maxMs.CompareAndSwap(m, ms) {
									break
								}
							}
							if e.TryUpdateAt(base.Add(time.Duration(ms)*time.Millisecond), fmt.Sprintf("k%d", k), 1, burst) {
								admitted[k].Add(1)
							}
						}
					})
				}
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatalf("calls did not all return within 60 s (livelock?): %d CASes so far", cas.Load())
				}
				e.setHooks(nil)
				calls := int64(G * per)
				t.Logf("%d calls, %d entry CASes (%.2f per call)", calls, cas.Load(), float64(cas.Load())/float64(calls))
				if c := cas.Load(); c > 4*calls {
					t.Fatalf("%d entry CASes for %d calls: retry storm", c, calls)
				}
				span := float64(maxMs.Load()) // ms from base
				for k := range keys {
					if a := float64(admitted[k].Load()); a > burst+rate/1000*span+1e-9 {
						t.Fatalf("key k%d: %v admitted, bound burst + rate x span = %v", k, a, burst+rate/1000*span)
					}
				}
			})
		}
	}
}

// TestAudit9TentativeWriteSpuriousDenial: a key alone (x; its lines are
// shared with another key y of a different fingerprint, as every line of
// a real table is). Limit 2, x owes nothing.
//
//  1. A = TryUpdateAt(t0, x, 2, 2) decides (0 + 2 <= 2), CASes its entry
//     and is held before its validation (afterCAS).
//  2. y is written at t0 + 1 ms (an Update): a line's time moves past A's.
//  3. C = TryUpdateAt(t0 + 1 ms, x, 1, 2) reads A's entry (x owes 1.99)
//     and is denied; C returns.
//  4. A validates: a time-only conflict.
//
// The audit found A undone there (its write tentative), so that B =
// TryUpdateAt(t0 + 1 ms, x, 2, 2), run at A's second decision, was
// admitted and A denied: C's denial came from a write that never took
// effect, a spurious denial of a key alone. Now A's entry, live and not
// under a move, stands (docs/design.md, section 8, "Stale time"): A is
// admitted at t0, never decides again (B does not run), and C's denial
// is what the serial order A, C gives.
func TestAudit9TentativeWriteSpuriousDenial(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	_, _, fx := e.Locate("x")
	y := ""
	for i := range 1000 {
		k := fmt.Sprintf("y%d", i)
		if _, _, f := e.Locate(k); f != fx {
			y = k
			break
		}
	}
	t0 := clk.Now()
	t1 := t0.Add(time.Millisecond)
	clk.Advance(time.Second)
	var inHook atomic.Bool
	var afterN, beforeN int
	var cOK, bOK bool
	var cRan, bRan bool
	e.setHooks(&testHooks{
		afterCAS: func() {
			if !inHook.CompareAndSwap(false, true) {
				return
			}
			defer inHook.Store(false)
			afterN++
			if afterN == 1 {
				e.UpdateAt(t1, y, 0.5)
				cOK, cRan = e.TryUpdateAt(t1, "x", 1, 2), true
			}
		},
		beforeCAS: func() {
			if !inHook.CompareAndSwap(false, true) {
				return
			}
			defer inHook.Store(false)
			beforeN++
			if beforeN == 2 {
				bOK, bRan = e.TryUpdateAt(t1, "x", 2, 2), true
			}
		},
	})
	aOK := e.TryUpdateAt(t0, "x", 2, 2)
	e.setHooks(nil)
	if !cRan {
		t.Fatalf("replay did not reach C (A's CASes %d, decisions %d)", afterN, beforeN)
	}
	q := e.QueryAt(t1, "x")
	if !aOK || cOK || bRan || q < 1.99-1e-9 || q > 1.99+1e-9 {
		t.Fatalf("A %v, C %v, B ran %v (%v); x reads %v: want A admitted at t0, C denied, no second decision of A, 1.99", aOK, cOK, bRan, bOK, q)
	}
}

// TestAudit9BuiltOnExponential: the built-on admission now covers the
// exponential law too (it was excluded: denied, keeping its write).
// A = TryUpdate(x, 5, 10) is held after its CAS; the clock moves 1 ms;
// B = TryUpdate(x, 4, 10) builds on A's entry (admitted: 5 decayed by
// 1 ms + 4 <= 10); A validates, cannot undo, and is admitted. x must
// then read at least 9 less the decay of 1 ms (both admissions count),
// and C = TryUpdate(x, 2, 10) must be denied.
func TestAudit9BuiltOnExponential(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Exponential(1, 100, 1e-6), clk)
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterCAS: pauseOnce(armedTrue(), paused, resume)})
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { aOK = e.TryUpdate("x", 5, 10) })
	<-paused
	clk.Advance(time.Millisecond)
	bOK := e.TryUpdate("x", 4, 10)
	close(resume)
	wg.Wait()
	e.setHooks(nil)
	q := e.Query("x")
	cOK := e.TryUpdate("x", 2, 10)
	t.Logf("A %v B %v C %v, x reads %v", aOK, bOK, cOK, q)
	if !aOK || !bOK {
		t.Fatalf("A %v, B %v: both should be admitted (x far below 10)", aOK, bOK)
	}
	if q < 8.99 {
		t.Fatalf("x reads %v < 9 less 1 ms of decay: an admission is missing", q)
	}
	if cOK {
		t.Fatalf("C admitted at %v + 2 > 10", q)
	}
}
