package bucket

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a10Others returns n keys whose fingerprint differs from x's.
func a10Others(e *Engine, x string, n int, prefix string) []string {
	_, _, fx := e.Locate(x)
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if _, _, f := e.Locate(k); f != fx {
			out = append(out, k)
		}
	}
	return out
}

// a10Check queries x at the times of seq (ms after t0, increasing) and
// checks each reading against x's exact debt: n tokens taken at t0,
// draining at rate per second. It allows one ms of drain above (a write
// stamps from the end of its tick), nothing below.
func a10Check(t *testing.T, e *Engine, t0 time.Time, x string, n, rate float64, te, at int64) {
	t.Helper()
	truth := max(0, n-rate*float64(at-te)/1000)
	q := e.QueryAt(t0.Add(time.Duration(at)*time.Millisecond), x)
	if q < truth-1e-9 {
		t.Fatalf("x reads %v at t0+%d ms, below its debt %v", q, at, truth)
	}
	if q > truth+rate/1000+1e-9 {
		t.Fatalf("x reads %v at t0+%d ms, above its debt %v (a phantom)", q, at, truth)
	}
}

// TestAudit10StandsThenMoves: A = TryUpdateAt(t0, x, n, limit) CASes its
// entry and is held before its validation (afterCAS); other keys (a
// different fingerprint) write at t0 + d in both lines, so A's
// validation finds the lines' time moved, and A's write stands (since
// 2026-12-04 always; before, only when its stamp was live at t0 + d,
// and it was undone otherwise). Then other keys move both lines through a sequence
// of short and long moves; at each time x must read its exact debt
// (never below, never a wrap above). Laws with a small slack
// (Linear(2000, 60), Linear(1000, 60)) and a large one (Linear(10, 40)).
func TestAudit10StandsThenMoves(t *testing.T) {
	for _, c := range []struct {
		name      string
		rate, max float64
		n         float64
		d         []int64 // the move during A's hold, ms after t0
		later     []int64 // later moves, ms after t0
	}{
		{"2000x60", 2000, 60, 50, []int64{1, 2, 3, 5, 10, 24, 25, 26}, []int64{1, 2, 3, 4, 6, 9, 15, 24, 25, 26, 30, 60, 1000, 70_000}},
		{"1000x60", 1000, 60, 50, []int64{1, 2, 3, 5, 10, 49, 50, 51}, []int64{1, 3, 5, 8, 13, 20, 40, 49, 50, 51, 60, 1000, 70_000}},
		{"10x40", 10, 40, 30, []int64{1, 100, 1000, 2999, 3000, 3001, 4000}, []int64{1, 300, 600, 1000, 2000, 2999, 3000, 3001, 4000, 10_000, 70_000, 7_000_000}},
	} {
		for _, d := range c.d {
			for _, byX := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/d%d/builtOn%v", c.name, d, byX), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					e := newTest(t, 2, Linear(c.rate, c.max), clk)
					t0 := clk.Now()
					clk.Advance(3 * time.Hour)
					ys := a10Others(e, "x", 40, "y")
					yi := 0
					next := func() string { yi++; return ys[yi%len(ys)] }
					// both lines at t0
					for range 4 {
						e.UpdateAt(t0, next(), 0.001)
					}
					var inHook atomic.Bool
					var cas int
					extra := 0.0
					e.setHooks(&testHooks{afterCAS: func() {
						if !inHook.CompareAndSwap(false, true) {
							return
						}
						defer inHook.Store(false)
						cas++
						if cas != 1 {
							return
						}
						at := t0.Add(time.Duration(d) * time.Millisecond)
						for range 4 {
							e.UpdateAt(at, next(), 0.001)
						}
						if byX {
							e.UpdateAt(at, "x", 1)
							extra = 1
						}
					}})
					ok := e.TryUpdateAt(t0, "x", c.n, c.max)
					e.setHooks(nil)
					if !ok {
						t.Fatalf("A denied (x owed 0)")
					}
					t.Logf("A: %d CASes", cas)
					last := d
					for _, at := range c.later {
						if at < last {
							continue
						}
						last = at
						for range 4 {
							e.UpdateAt(t0.Add(time.Duration(at)*time.Millisecond), next(), 0.001)
						}
						if extra == 0 {
							// A stands at t0 (one CAS) or is decided
							// again at t0 + d, the lines' time.
							te := int64(0)
							if cas > 1 {
								te = d
							}
							a10Check(t, e, t0, "x", c.n, c.rate, te, at)
						} else {
							truth := max(0, c.n-c.rate*float64(d)/1000) + 1
							truth = max(0, truth-c.rate*float64(at-d)/1000)
							q := e.QueryAt(t0.Add(time.Duration(at)*time.Millisecond), "x")
							if q < truth-1e-9 || q > truth+2*c.rate/1000+1e-9 {
								t.Fatalf("x reads %v at t0+%d ms, debt %v", q, at, truth)
							}
						}
					}
				})
			}
		}
	}
}

// TestAudit10ShortMoveReadBeforeCAS: the mover's read of the line
// predates A's CAS. A (x, at t0, line at t0) is held before its header
// check (beforeCAS); M = UpdateAt(t0 + d, y) reads the line and is held
// before its header CAS (a short move, or the moving bit of a long
// one); A then checks its header (unchanged), CASes and is held
// (afterCAS); M completes. A validates: the line's time moved. x must
// then read its exact debt at every later time, through further moves.
func TestAudit10ShortMoveReadBeforeCAS(t *testing.T) {
	for _, c := range []struct {
		name      string
		rate, max float64
		n         float64
		d         []int64
	}{
		{"2000x60", 2000, 60, 50, []int64{1, 2, 3, 24, 25, 26, 40}},
		{"1000x60", 1000, 60, 50, []int64{1, 2, 3, 49, 50, 51, 60}},
		{"10x40", 10, 40, 30, []int64{1, 100, 2999, 3000, 3001, 5000}},
	} {
		for _, d := range c.d {
			t.Run(fmt.Sprintf("%s/d%d", c.name, d), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				e := newTest(t, 2, Linear(c.rate, c.max), clk)
				t0 := clk.Now()
				clk.Advance(3 * time.Hour)
				ys := a10Others(e, "x", 40, "y")
				for _, y := range ys[:4] {
					e.UpdateAt(t0, y, 0.001)
				}
				// The line A will target: x's first line (x has no entry,
				// both lines have the same live count of small entries).
				pausedA, resumeA := make(chan struct{}), make(chan struct{})
				pausedV, resumeV := make(chan struct{}), make(chan struct{})
				pausedM, resumeM := make(chan struct{}), make(chan struct{})
				var armA, armV, armM atomic.Bool
				armA.Store(true)
				var casN atomic.Int32
				holdV := pauseOnce(&armV, pausedV, resumeV)
				e.setHooks(&testHooks{
					beforeCAS: pauseOnce(&armA, pausedA, resumeA),
					afterCAS:  func() { casN.Add(1); holdV() },
					beforeMove: func(h uint64) {
						if armM.CompareAndSwap(true, false) {
							close(pausedM)
							<-resumeM
						}
					},
				})
				var aOK bool
				var wg sync.WaitGroup
				wg.Go(func() { aOK = e.TryUpdateAt(t0, "x", c.n, c.max) })
				<-pausedA
				armA.Store(false)
				// M: a key writing into A's target line. Find which line
				// A targets: the one with fewer live entries or line 0.
				at := t0.Add(time.Duration(d) * time.Millisecond)
				armM.Store(true)
				mDone := make(chan struct{})
				// y keys in both lines: whichever moves first is held.
				go func() {
					for _, y := range ys[4:8] {
						e.UpdateAt(at, y, 0.001)
					}
					close(mDone)
				}()
				select {
				case <-pausedM:
				case <-time.After(2 * time.Second):
					t.Fatal("M never moved a line")
				}
				armV.Store(true)
				close(resumeA)
				select {
				case <-pausedV:
				case <-time.After(2 * time.Second):
					close(resumeM)
					t.Fatal("A never CASed while M held")
				}
				armV.Store(false)
				close(resumeM)
				<-mDone
				close(resumeV)
				wg.Wait()
				e.setHooks(nil)
				if !aOK {
					t.Fatal("A denied")
				}
				// CASes: 4 of M's keys, A's one (stands, at t0) or two
				// (undone, decided again at t0 + d).
				te := int64(0)
				if casN.Load() > 5 {
					te = d
				}
				t.Logf("%d CASes", casN.Load())
				for _, later := range []int64{d, d + 1, d + 3, d + 10, d + 30, d + 100, d + 3000, d + 70_000} {
					for _, y := range ys[8:12] {
						e.UpdateAt(t0.Add(time.Duration(later)*time.Millisecond), y, 0.001)
					}
					a10Check(t, e, t0, "x", c.n, c.rate, te, later)
				}
			})
		}
	}
}

// TestAudit10StandsExponential: TestAudit10StandsThenMoves on the
// exponential law (stands applies to it too): A = TryUpdateAt(t0, x, n)
// held after its CAS while other keys write at t0 + d; then further
// moves. x must read at least n decayed from t0 (less DropSlack) and at
// most n decayed from t0 + d (the latest time A may have been decided
// again at), at every later time.
func TestAudit10StandsExponential(t *testing.T) {
	for _, c := range []struct {
		lambda, max, res float64
	}{{1, 100, 1e-6}, {50, 100, 1e-3}, {0.01, 1000, 1e-6}} {
		for _, d := range []int64{1, 2, 5, 20, 100, 1000, 10_000} {
			t.Run(fmt.Sprintf("l%v/d%d", c.lambda, d), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				e := newTest(t, 2, Exponential(c.lambda, c.max, c.res), clk)
				t0 := clk.Now()
				clk.Advance(1000 * time.Hour)
				ys := a10Others(e, "x", 40, "y")
				yi := 0
				next := func() string { yi++; return ys[yi%len(ys)] }
				for range 4 {
					e.UpdateAt(t0, next(), c.res*2)
				}
				var inHook atomic.Bool
				cas := 0
				e.setHooks(&testHooks{afterCAS: func() {
					if !inHook.CompareAndSwap(false, true) {
						return
					}
					defer inHook.Store(false)
					cas++
					if cas == 1 {
						for range 4 {
							e.UpdateAt(t0.Add(time.Duration(d)*time.Millisecond), next(), c.res*2)
						}
					}
				}})
				n := c.max / 2
				if !e.TryUpdateAt(t0, "x", n, c.max) {
					t.Fatal("A denied")
				}
				e.setHooks(nil)
				te := int64(0)
				if cas > 1 {
					te = d
				}
				for _, later := range []int64{d, d + 1, d + 10, d + 100, d + 1000, d + 100_000} {
					for range 4 {
						e.UpdateAt(t0.Add(time.Duration(later)*time.Millisecond), next(), c.res*2)
					}
					q := e.QueryAt(t0.Add(time.Duration(later)*time.Millisecond), "x")
					lo := n*math.Exp(-c.lambda*float64(later-te)/1000) - DropSlack(e)
					hi := n * math.Exp(-c.lambda*float64(later-te)/1000) * math.Exp(2*e.q.kappa) * (1 + 1e-6) // a stamp rounds up to a tick, a time down to one
					if q < lo-1e-9 || q > hi+c.res {
						t.Fatalf("x reads %v at t0+%d ms (A's CASes %d), want in [%v, %v]", q, later, cas, lo, hi)
					}
				}
			})
		}
	}
}

// TestAudit10StandsThenRefund: x holds p tokens from t0 - 1 ms; A =
// TryReserveAt(t0, x, n) writes on top of that entry and is held before
// its validation while other keys move the lines to t0 + d (A stands, or
// is undone and decided again at t0 + d). Later (after moves by other
// keys to t0 + d + g), A's Receipt is refunded. x must then read at
// least p's exact debt (and nothing of n where the refund succeeded),
// never a wrap above it.
func TestAudit10StandsThenRefund(t *testing.T) {
	for _, c := range []struct {
		name      string
		rate, max float64
		ds, gs    []int64
	}{
		{"2000x60", 2000, 60, []int64{1, 2, 3, 6, 10}, []int64{0, 1, 2, 3, 5, 8, 20, 100}},
		{"10x40", 10, 40, []int64{1, 100, 400, 1000}, []int64{0, 1, 300, 400, 1000, 3000, 10_000}},
	} {
		for _, d := range c.ds {
			for _, g := range c.gs {
				t.Run(fmt.Sprintf("%s/d%d/g%d", c.name, d, g), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					e := newTest(t, 2, Linear(c.rate, c.max), clk)
					t0 := clk.Now()
					clk.Advance(1000 * time.Hour)
					ys := a10Others(e, "x", 40, "y")
					yi := 0
					next := func() string { yi++; return ys[yi%len(ys)] }
					p := c.max / 4
					e.UpdateAt(t0.Add(-time.Millisecond), "x", p)
					for range 4 {
						e.UpdateAt(t0, next(), 0.001)
					}
					var inHook atomic.Bool
					cas := 0
					e.setHooks(&testHooks{afterCAS: func() {
						if !inHook.CompareAndSwap(false, true) {
							return
						}
						defer inHook.Store(false)
						cas++
						if cas == 1 {
							for range 4 {
								e.UpdateAt(t0.Add(time.Duration(d)*time.Millisecond), next(), 0.001)
							}
						}
					}})
					n := c.max / 4
					rc, ok := e.TryReserveAt(t0, "x", n, c.max)
					e.setHooks(nil)
					if !ok {
						t.Fatal("A denied")
					}
					at := d + g
					for range 4 {
						e.UpdateAt(t0.Add(time.Duration(at)*time.Millisecond), next(), 0.001)
					}
					refunded := e.Refund(&rc)
					r := c.rate / 1000
					pt := max(0, p-r*float64(at+1))
					te := int64(0)
					if cas > 1 {
						te = d
					}
					truth := max(0, p+n-r*float64(at+1)) // A on top of p, at t0 (p's stamp carried)
					if cas > 1 {
						truth = max(0, max(p-r*float64(d+1), 0)+n-r*float64(at-te))
					}
					if refunded {
						truth = pt
					}
					for _, later := range []int64{at, at + 1, at + 5, at + 500, at + 70_000} {
						for range 4 {
							e.UpdateAt(t0.Add(time.Duration(later)*time.Millisecond), next(), 0.001)
						}
						q := e.QueryAt(t0.Add(time.Duration(later)*time.Millisecond), "x")
						tr := max(0, truth-r*float64(later-at))
						if q < tr-1e-9 || q > tr+2*r+1e-9 && q > max(0, p+n-r*float64(later))+2*r {
							t.Fatalf("x reads %v at t0+%d ms (A's CASes %d, refunded %v), want %v", q, later, cas, refunded, tr)
						}
					}
				})
			}
		}
	}
}
