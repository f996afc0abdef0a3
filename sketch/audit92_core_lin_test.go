package sketch_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a92coreEv is one operation of a recorded single-cell history.
type a92coreEv struct {
	kind       byte // 'u' Update, 't' TryUpdate, 'q' Query, 'a' UpdateAndQuery
	d, lim     float64
	ok         bool
	out        float64
	call, done int64 // positions in the global event order
}

// a92coreLinearizable reports whether evs (one key alone in one cell: L = 1,
// no decay, a frozen clock, integer values) has a sequential order that
// respects real time and the clamped-integer model: Update adds and
// clamps, TryUpdate admits iff score + d <= lim, Query returns the score,
// UpdateAndQuery returns the score after its add. Wing & Gong's search
// with a memo on (done set, score).
func a92coreLinearizable(evs []a92coreEv, lo, hi float64) bool {
	n := len(evs)
	seen := map[[2]uint64]bool{}
	var dfs func(mask uint64, score float64) bool
	dfs = func(mask uint64, score float64) bool {
		if mask == 1<<n-1 {
			return true
		}
		key := [2]uint64{mask, uint64(int64(score))}
		if seen[key] {
			return false
		}
		seen[key] = true
		// The earliest response among the pending ops bounds which may go next.
		minDone := int64(1 << 62)
		for i, e := range evs {
			if mask&(1<<i) == 0 && e.done < minDone {
				minDone = e.done
			}
		}
		for i, e := range evs {
			if mask&(1<<i) != 0 || e.call > minDone {
				continue
			}
			next := score
			switch e.kind {
			case 'u':
				next = min(max(score+e.d, lo), hi)
			case 'a':
				next = min(max(score+e.d, lo), hi)
				if e.out != next {
					continue
				}
			case 'q':
				if e.out != score {
					continue
				}
			case 't':
				fits := score+e.d <= e.lim
				if fits != e.ok {
					continue
				}
				if fits {
					next = min(max(score+e.d, lo), hi)
				}
			}
			if dfs(mask|1<<i, next) {
				return true
			}
		}
		return false
	}
	return dfs(0, 0)
}

// TestAudit92CoreSingleCellLinearizableAtClamps: sketch/doc.go ("Each
// cell is linearizable on its own") together with the no-write shortcut
// (Sketch: "A write that would leave a cell as it is (a score pinned at
// Hi or Lo within the same millisecond ...) does not write it"; design.md
// "No write when nothing changes": the skipped add "takes effect at the
// load"). With L = 1 a key is one cell, so Update, UpdateAndQuery,
// TryUpdate and Query of it must form linearizable histories. Small
// bounds [-4, 6] keep the cell pinned at Hi or Lo most of the time, so
// many adds are skipped while others move the cell. Integer deltas, no
// decay, a frozen clock: the model is exact. Histories come from
// goroutines racing, so the interleavings differ run to run; the check
// holds for every one.
func TestAudit92CoreSingleCellLinearizableAtClamps(t *testing.T) {
	rounds, workers, per := 60, 3, 6
	if testsize.Small() {
		rounds = 20
	}
	const lo, hi = -4.0, 6.0
	// The checker itself: a Query that saw an Update's +3 before the
	// Update was called is not linearizable; after it returned, it is.
	bad := []a92coreEv{{kind: 'q', out: 3, call: 1, done: 2}, {kind: 'u', d: 3, call: 3, done: 4}}
	good := []a92coreEv{{kind: 'u', d: 3, call: 1, done: 2}, {kind: 'q', out: 3, call: 3, done: 4}}
	if a92coreLinearizable(bad, lo, hi) || !a92coreLinearizable(good, lo, hi) {
		t.Fatal("the linearizability checker is broken")
	}
	for round := range rounds {
		clk := sketchtest.NewFakeClock()
		clk.Set(777_000)
		s, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 4, Lo: lo, Hi: hi, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("one")
		// Yield between an operation's load and its write (or skip), so
		// that the racing goroutines interleave inside operations.
		yield := func(uint32) { runtime.Gosched() }
		core.SetHooks(core.SketchOf(s), core.Hooks{Load: yield, Skip: yield, BeforeCAS: yield})
		var order atomic.Int64
		evs := make([][]a92coreEv, workers)
		var wg sync.WaitGroup
		for w := range workers {
			r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			wg.Go(func() {
				for range per {
					e := a92coreEv{d: float64(r.IntN(13) - 6)}
					switch r.IntN(5) {
					case 0, 1:
						e.kind = 'u'
					case 2:
						e.kind = 'a'
					case 3:
						e.kind, e.lim = 't', float64(r.IntN(13)-4)
					default:
						e.kind = 'q'
					}
					e.call = order.Add(1)
					switch e.kind {
					case 'u':
						s.Update(k, e.d)
					case 'a':
						e.out = s.UpdateAndQuery(k, e.d)
					case 't':
						e.ok = s.TryUpdate(k, e.d, e.lim)
					case 'q':
						e.out = s.Query(k)
					}
					e.done = order.Add(1)
					evs[w] = append(evs[w], e)
				}
			})
		}
		wg.Wait()
		var all []a92coreEv
		for _, es := range evs {
			all = append(all, es...)
		}
		if !a92coreLinearizable(all, lo, hi) {
			for _, e := range all {
				t.Logf("[%d,%d] %c d=%v lim=%v ok=%v out=%v", e.call, e.done, e.kind, e.d, e.lim, e.ok, e.out)
			}
			t.Fatalf("round %d: the single-cell history above is not linearizable", round)
		}
	}
}

// TestAudit92CoreProgressWhileCommitHeld: sketch/doc.go ("No locks ...
// Query and a denied TryUpdate only read. An admitted TryUpdate waits
// only for an admitted TryUpdate of a key on the same stripe") and
// design.md ("Query, Update, UpdateAndQuery and denials never wait for
// anything"). An admitted TryUpdate of X is held inside its commit (its
// stripe odd) by the BeforeCAS hook; meanwhile, on X's own key and on a
// key of X's stripe: Query, Update, UpdateAndQuery and a denied TryUpdate
// return, and an admitted TryUpdate of a key on another stripe that
// shares none of X's cells returns. Released, X completes.
func TestAudit92CoreProgressWhileCommitHeld(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: 0, Hi: 100, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	x := []byte("px")
	st := core.StripeOf(core.SketchOf(s), x)
	cx := a92coreCells(s, x)
	var same, other []byte
	for i := 0; same == nil || other == nil; i++ {
		k := []byte(fmt.Sprintf("pk-%d", i))
		c := a92coreCells(s, k)
		if c[0] == cx[0] || c[1] == cx[1] {
			continue
		}
		if core.StripeOf(core.SketchOf(s), k) == st {
			if same == nil {
				same = k
			}
		} else if other == nil {
			other = k
		}
	}
	s.Update(same, 50)
	hold := a88negNewHold(1)
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(x, 1, 10) }()
	hold.wait(t)
	if seq := core.StripeSeq(core.SketchOf(s), x); seq&1 == 0 {
		t.Fatalf("X is held in its commit but its stripe's seq is even (%d)", seq)
	}
	ops := map[string]func(){
		"Query(x)":                  func() { s.Query(x) },
		"Update(same, 1)":           func() { s.Update(same, 1) },
		"UpdateAndQuery(same, 1)":   func() { s.UpdateAndQuery(same, 1) },
		"Query(same)":               func() { s.Query(same) },
		"denied TryUpdate(same)":    func() { s.TryUpdate(same, 1, 10) },
		"admitted TryUpdate(other)": func() { s.TryUpdate(other, 1, 10) },
	}
	for name, op := range ops {
		ret := make(chan struct{})
		go func() { op(); close(ret) }()
		select {
		case <-ret:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not return while X's commit was held", name)
		}
	}
	close(hold.release)
	if !<-done {
		t.Error("X's TryUpdate(x, 1, 10) denied on an empty key")
	}
	core.SetHooks(core.SketchOf(s), core.Hooks{})
	if got := s.Query(x); got != 1 {
		t.Errorf("Query(x) = %v after its admission, want 1", got)
	}
	if got := s.Query(same); got != 52 {
		t.Errorf("Query(same) = %v, want 52", got)
	}
	if got := s.Query(other); got != 1 {
		t.Errorf("Query(other) = %v, want 1", got)
	}
}
