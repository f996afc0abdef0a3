package sketch_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Never below the truth: deterministic replays of the edges where an
// estimate used to fall below a key's true score: roll-backs at the Hi
// clamp, custom decay laws, the linear law with negative shares, a
// panicking law in the horizon sweep, stale operations across a re-base,
// and the reference on a negative clock. Every test here failed on the
// code before the exact roll-back.

// TestRollbackAtHiUndoAfterCut: an admitted TryUpdate(A, 5) commits level
// 0 and is held before level 1; B adds 100 alone, which the clamp cuts to
// Hi at level 0 (A's 5 is part of what was cut); A's CAS on level 1 fails
// and its undo of level 0 must not take 5 out of B's 100.
func TestRollbackAtHiUndoAfterCut(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Clock: sketchtest.NewFakeClock()})
	keys := keysOnDistinctStripes(t, s, 2)
	a, b := keys[0], keys[1]
	hold := newHoldPoint(1, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(a, 5, 100) }()
	hold.wait(t, "A's CAS on level 1")
	s.Update(b, 100) // level 0: 5 + 100 cut to 100; level 1: 100
	close(hold.release)
	if <-done {
		t.Error("A admitted at 100 + 5 > 100")
	}
	if got := s.Query(b); got < 100 {
		t.Fatalf("Query(B) = %v < 100, what B alone wrote: A's undo took B's mass", got)
	}
}

// TestRollbackAtHiIdenticalWord: A's commit brings level 0 exactly to Hi;
// B's add there is cut entirely and stores the very same word; A's undo
// must not restore level 0 under B's add (a CAS cannot see B's write).
func TestRollbackAtHiIdenticalWord(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Clock: sketchtest.NewFakeClock()})
	keys := keysOnDistinctStripes(t, s, 2)
	a, b := keys[0], keys[1]
	s.Update(b, 90)
	hold := newHoldPoint(1, 1)
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(a, 10, 100) }() // 90 + 10 <= 100
	hold.wait(t, "A's CAS on level 1")
	s.Update(b, 5) // level 0: 100 + 5 cut to 100 (same word); level 1: 95
	close(hold.release)
	if <-done {
		t.Error("A admitted at min(100, 95) + 10 > 100")
	}
	if got := s.Query(b); got < 95 {
		t.Fatalf("Query(B) = %v < 95, what B alone wrote: A's undo erased B's cut write", got)
	}
}

// TestRollbackAtHiRefund: a Receipt refunded after another key's add was
// cut at Hi must not take the refund out of that key's mass.
func TestRollbackAtHiRefund(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Clock: clk})
	rc, ok := core.SketchOf(s).TryReserveAt(clk.Now(), []byte("a"), 5, 100)
	if !ok {
		t.Fatal("TryReserve denied on an empty sketch")
	}
	s.Update([]byte("b"), 100) // 5 + 100 cut to 100
	if core.SketchOf(s).Refund(&rc) {
		t.Error("Refund reported giving back from cells at Hi")
	}
	if got := s.Query([]byte("b")); got < 100 {
		t.Fatalf("Query(b) = %v < 100 after a's refund", got)
	}
}

// hyperbolic is a conforming custom law (monotone, never crosses 0,
// composes): 1/s' = 1/s + k*t. It is not superadditive, so the remainder
// of an increment inside a sum is not Apply(increment).
type hyperbolic struct{ k float64 }

func (h hyperbolic) Apply(s float64, dt int64) float64 {
	if dt <= 0 || s == 0 {
		return s
	}
	return s / (1 + h.k*math.Abs(s)*float64(dt)/1000)
}

// TestRefundCustomLaw: a key writes 5, reserves 5 more and gives them
// back a second later; it must read its own 5 decayed for a second.
func TestRefundCustomLaw(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	law := hyperbolic{0.1}
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: law, Clock: clk})
	k := []byte("k")
	s.Update(k, 5)
	rc, ok := core.SketchOf(s).TryReserveAt(clk.Now(), k, 5, 100)
	if !ok {
		t.Fatal("TryReserve denied")
	}
	clk.Advance(time.Second)
	if !core.SketchOf(s).Refund(&rc) {
		t.Fatal("Refund of untouched cells did not restore")
	}
	truth := law.Apply(5, 1000)
	if got := s.Query(k); got < truth {
		t.Fatalf("Query(k) = %v < its true %v: the refund removed more than the increment's remainder", got, truth)
	}
}

// TestRefundLinearNegativeShare: under Linear with Lo < 0, a refund in a
// cell holding another key's negative share must leave the cell at the
// reference's value without the refunded increment.
func TestRefundLinearNegativeShare(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 1, Lo: -100, Hi: 100, Decay: decay.Linear(1), Clock: clk}
	s := mustNewSketch(t, cfg)
	ref := mustNewReference(t, cfg)
	s.Update([]byte("b"), -10)
	ref.Update([]byte("b"), -10)
	rc, ok := core.SketchOf(s).TryReserveAt(clk.Now(), []byte("a"), 20, 100) // -10 + 20 = 10
	if !ok {
		t.Fatal("TryReserve denied")
	}
	clk.Advance(3 * time.Second)
	core.SketchOf(s).Refund(&rc)
	want := ref.Query([]byte("b")) // -7: the reference never saw the reservation
	if got := s.Query([]byte("b")); got < want {
		t.Fatalf("Query(b) = %v < the reference's %v: the refund over-removed", got, want)
	}
}

// panicky is a law that panics while armed.
type panicky struct{ armed *atomic.Bool }

func (p panicky) Apply(s float64, dt int64) float64 {
	if p.armed.Load() {
		panic("panicky law")
	}
	return s
}

// TestPanickingLawCannotWedge: a custom law that panics inside the
// horizon sweep must not leave the sweep's lock held: after the panic, an
// operation that needs the sweep (the clock past the window) returns.
// The reference's cell locks likewise.
func TestPanickingLawCannotWedge(t *testing.T) {
	armed := new(atomic.Bool)
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 1e6, Decay: panicky{armed}, Clock: clk}
	s := mustNewSketch(t, cfg)
	ref := mustNewReference(t, cfg)
	k := []byte("k")
	s.Update(k, 5)
	ref.Update(k, 5)
	clk.Advance(time.Duration(1<<30+1) * time.Millisecond) // the sweep is due
	armed.Store(true)
	if msg := sketchtest.Panics(func() { s.Query([]byte("other")) }); msg == "" {
		t.Fatal("the sweep did not call the law (test setup)")
	}
	if msg := sketchtest.Panics(func() { ref.Query(k) }); msg == "" {
		t.Fatal("the reference did not call the law (test setup)")
	}
	armed.Store(false)
	clk.Advance(time.Duration(1<<31) * time.Millisecond) // past the window: the next operation must sweep
	done := make(chan struct{})
	go func() {
		s.Query(k)
		ref.Query(k)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an operation after the law's panic blocked: a lock was left held")
	}
}

// TestPanickingLawRestoresNothingHalf: a custom law that panics while a
// snapshot is restored (it decays each cell older than 2^29 ms once)
// leaves the sketch empty, as an error would, not half restored: before,
// the cells read before the panic held the snapshot and the rest the
// old contents. The panic reaches the caller and the sketch stays usable.
func TestPanickingLawRestoresNothingHalf(t *testing.T) {
	armed := new(atomic.Bool)
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 4096, Hi: 1e6, Decay: panicky{armed}, Clock: clk}
	src := mustNewSketch(t, cfg)
	dst := mustNewSketch(t, cfg)
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("k%d", i))
		src.Update(keys[i], 7)
		dst.Update(keys[i], 3) // the old contents
	}
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Duration(1<<29+1) * time.Millisecond) // every cell is decayed once on restore
	armed.Store(true)
	if msg := sketchtest.Panics(func() { _ = dst.UnmarshalBinary(snap) }); msg == "" {
		t.Fatal("the restore did not call the law (test setup)")
	}
	armed.Store(false)
	for _, k := range keys {
		if v := dst.Query(k); v != 0 {
			t.Fatalf("Query(%s) = %v after a restore the law's panic stopped; want 0 (empty, never half restored)", k, v)
		}
	}
	dst.Update(keys[0], 1)
	if v := dst.Query(keys[0]); v < 1 {
		t.Fatalf("Query after the panic and an Update of 1 = %v", v)
	}
}

// TestStaleOperation: an operation that read its time, then was held
// while the clock jumped 3*2^30 ms and another operation re-based every
// cell to the later time, must not read the re-based stamps as a large
// age (over-decay) nor stamp a cell in the past.
func TestStaleOperation(t *testing.T) {
	const lambda = 1e-7 // per second: 0.81 of a score is left after 2^31 ms
	jump := time.Duration(3<<30) * time.Millisecond
	truth := func(v float64, d time.Duration) float64 { return v * math.Exp(-lambda*d.Seconds()) }
	for _, op := range []string{"Query", "Update"} {
		t.Run(op, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: clk})
			k := []byte("k")
			s.Update(k, 100)
			clk.Advance(time.Second)
			hold := newHoldPoint(0, 1)
			core.SetHooks(core.SketchOf(s), core.Hooks{Load: hold.hook})
			got := make(chan float64, 1)
			go func() {
				if op == "Query" {
					got <- s.Query(k)
				} else {
					s.Update(k, 1)
					got <- 0
				}
			}()
			hold.wait(t, "the operation's loads")
			clk.Advance(jump)
			s.Update([]byte("other"), 1) // past the window: re-bases every cell to now
			close(hold.release)
			v := <-got
			want := truth(100, time.Second+jump)
			if op == "Update" {
				want++
				v = s.Query(k)
			}
			if v < want*(1-1e-6) {
				t.Fatalf("%s after the re-base: %v < the key's true %v (over-decayed by a stale age)", op, v, want)
			}
		})
	}
}

// TestReferenceNegativeClock: the reference decays while the clock reads
// negative, as the lock-free sketch does.
func TestReferenceNegativeClock(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(-10_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: decay.Linear(1), Clock: clk}
	ref := mustNewReference(t, cfg)
	s := mustNewSketch(t, cfg)
	for _, sc := range []sketch.Scorer{ref, s} {
		sc.Update([]byte("k"), 10)
	}
	clk.Advance(2 * time.Second) // still negative
	for name, sc := range map[string]sketch.Scorer{"reference": ref, "lock-free": s} {
		if got := sc.Query([]byte("k")); got != 8 {
			t.Errorf("%s: Query = %v at clock -8000 after 2 s of Linear(1) from 10, want 8", name, got)
		}
	}
}

// TestRollbackAtHiStress races, on keys of distinct stripes that share
// every cell (M = 1, 2), a heavy key H that keeps pinning the cells at Hi
// with Update(H, Hi), against light keys' TryUpdates (limits below, at
// and above Hi) and Updates, under Linear decay on a fake clock that
// ticks as the run goes: the cells keep draining below Hi, the light
// keys commit, conflict and roll back, and H's adds are cut at the clamp.
// H's true score is at least Hi minus the drain since the last of its
// Updates that had returned; its estimate must never fall below that,
// during the run and at the end. Roll-backs that could not be exact are
// counted (in the log: the held rate).
func TestRollbackAtHiStress(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, m := range []uint32{1, 2} {
			for _, levels := range []uint32{2, 4} {
				rollbackStress(t, m, levels)
			}
		}
	})
}

func rollbackStress(t *testing.T, m, levels uint32) {
	const (
		hi      = 100.0
		rate    = 1000.0 // per second: 1 per tick of the fake clock
		lights  = 5
		workers = 6
	)
	ops := 4000
	if testing.Short() {
		ops = 800
	}
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: levels, CellsPerLevel: m, Hi: hi, Decay: decay.Linear(rate), Clock: clk})
	var held, conflicts, admitted atomic.Int64
	core.SetHooks(core.SketchOf(s), core.Hooks{
		Held:     func(uint32) { held.Add(1) },
		Conflict: func(uint32) { conflicts.Add(1) },
	})
	keys := keysOnDistinctStripes(t, s, lights+1)
	h := keys[lights]
	// pinned is the clock reading taken before the last Update(H, Hi) that
	// has returned: H's true score is at least Hi - drain since then.
	var pinned atomic.Int64
	pinned.Store(clk.NowMillis())
	s.Update(h, hi)
	var bad atomic.Value
	check := func() {
		// H's last pin before the read, the clock after it: the read's
		// time lies between, so its truth is at least this floor.
		p := pinned.Load()
		got := s.Query(h)
		if f := hi - rate*float64(clk.NowMillis()-p)/1000; got < f {
			bad.Store([2]float64{got, f})
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // H: pins, reads itself, moves the clock
		for i := range ops {
			before := clk.NowMillis()
			s.Update(h, hi)
			pinned.Store(before)
			check()
			if i%3 == 0 {
				clk.Advance(time.Millisecond)
			}
		}
	})
	for g := range workers {
		wg.Go(func() {
			for i := range ops {
				k := keys[(g+i)%lights]
				d := float64(1+(i*7+g)%5) / 2 // 0.5 .. 2.5
				switch i % 6 {
				case 0:
					s.Update(k, d)
				case 1:
					check()
				default:
					if s.TryUpdate(k, d, []float64{90, hi, 150}[(i+g)%3]) {
						admitted.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	check()
	if v := bad.Load(); v != nil {
		p := v.([2]float64)
		t.Fatalf("M=%d L=%d: H read %v, below its true score (at least %v)", m, levels, p[0], p[1])
	}
	t.Logf("M=%d L=%d: %d admitted, %d commit conflicts, %d levels kept a denied call's increment",
		m, levels, admitted.Load(), conflicts.Load(), held.Load())
}

var _ sketch.Scorer = (*ref.Sketch)(nil)
