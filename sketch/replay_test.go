package sketch_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Deterministic replays of the interleavings the TryUpdate argument
// worries about (docs/design.md, "TryUpdate"), driven through the
// sketch's test hooks: one goroutine is held at a hook while the test
// goroutine runs other operations, then released.

// holdPoint holds the n-th call of a hook (counting from 1) until
// released; other calls pass.
type holdPoint struct {
	mu       sync.Mutex
	level    uint32
	n, calls int
	reached  chan struct{}
	release  chan struct{}
}

func newHoldPoint(level uint32, n int) *holdPoint {
	return &holdPoint{level: level, n: n, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdPoint) hook(level uint32) {
	if level != h.level {
		return
	}
	h.mu.Lock()
	h.calls++
	hit := h.calls == h.n
	h.mu.Unlock()
	if hit {
		close(h.reached)
		<-h.release
	}
}

func (h *holdPoint) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(10 * time.Second):
		t.Fatalf("no operation reached %s", what)
	}
}

// keysOnDistinctStripes returns n keys whose TryUpdate stripes differ.
func keysOnDistinctStripes(t *testing.T, s *sketch.Sketch, n int) [][]byte {
	t.Helper()
	seen := map[uint64]bool{}
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		if st := core.StripeOf(core.SketchOf(s), k); !seen[st] {
			seen[st] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// TestReplayCrossStripeOverAdmission replays the interleaving that
// over-admitted before the commit learned to undo and re-snapshot: L=2,
// M=1 (every key's estimate is the total), limit 2, keys X, Y, Z on three
// stripes.
//
//	X snapshots (0,0), CASes c0 to 1, is held before its CAS on c1
//	Z sees (1,0): admitted, writes (2,1)
//	X's CAS on c1 fails; X is held at the conflict
//	Y sees (2,1): admitted, writes (3,2)
//	X resumes: it must not be admitted (the old protocol combined a
//	stale c0 with a fresh c1 and admitted a third)
func TestReplayCrossStripeOverAdmission(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Clock: sketchtest.NewFakeClock()})
	keys := keysOnDistinctStripes(t, s, 3)
	x, y, z := keys[0], keys[1], keys[2]
	beforeCAS1 := newHoldPoint(1, 1) // X, before its CAS on c1
	conflict1 := newHoldPoint(1, 1)  // X, after that CAS failed
	core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: beforeCAS1.hook, Conflict: conflict1.hook})
	xDone := make(chan bool)
	go func() { xDone <- s.TryUpdate(x, 1, 2) }()
	beforeCAS1.wait(t, "X's CAS on c1")
	if !s.TryUpdate(z, 1, 2) {
		t.Fatal("Z denied at (1,0)")
	}
	close(beforeCAS1.release)
	conflict1.wait(t, "X's conflict on c1")
	if !s.TryUpdate(y, 1, 2) {
		t.Fatal("Y denied at (2,1)")
	}
	close(conflict1.release)
	if <-xDone {
		t.Fatalf("X admitted after Z and Y: 3 admitted with limit 2; cells %v", s.QueryDetailed(x).Levels)
	}
	for l, c := range s.QueryDetailed(x).Levels {
		if c.Score != 2 {
			t.Errorf("level %d holds %v after X's undo, want 2 (Z and Y)", l, c.Score)
		}
	}
}

// expLaw is exact exponential decay as a custom law (so it takes the
// sketch's slow path, like a user's own law).
type expLaw struct{ lambda float64 }

func (e expLaw) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return score * math.Exp(-e.lambda*float64(dt)/1000)
}

// TestReplayRollbackAfterLaterDecay replays the roll-back that removed
// more than it added: an admitted TryUpdate(k) CASes c0 and is held
// before c1; the clock moves 2 s and an Update of a key B sharing both
// cells decays them to the later time and adds to them; k's CAS on c1
// fails and its undo of c0 must take only what is left of its increment
// at c0's newer stamp. Every key's estimate must stay >= its exact
// score. Run for the built-in exponential law and the same law as a
// custom one, and for Linear.
func TestReplayRollbackAfterLaterDecay(t *testing.T) {
	laws := []struct {
		name  string
		law   decay.Decay
		truth func(v float64, dt time.Duration) float64 // one key's score decayed on its own
	}{
		{"Exponential(0.5)", decay.Exponential(0.5), func(v float64, dt time.Duration) float64 { return v * math.Exp(-0.5*dt.Seconds()) }},
		{"custom exponential", expLaw{0.5}, func(v float64, dt time.Duration) float64 { return v * math.Exp(-0.5*dt.Seconds()) }},
		{"Linear(1)", decay.Linear(1), func(v float64, dt time.Duration) float64 { return max(v-dt.Seconds(), 0) }},
	}
	for _, lw := range laws {
		t.Run(lw.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 1e6, Decay: lw.law, Clock: clk})
			keys := keysOnDistinctStripes(t, s, 2)
			k, b := keys[0], keys[1]
			hold := newHoldPoint(1, 1)
			// Deny k's retry, so the undo is final: its limit is just
			// above what the cells hold before its own +5.
			core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
			s.Update(b, 10) // B: 10 at t0 in both cells
			done := make(chan bool)
			go func() { done <- s.TryUpdate(k, 5, 15) }()
			hold.wait(t, "k's CAS on c1")
			clk.Advance(2 * time.Second)
			s.Update(b, 20) // B at t0+2s: decays both cells (c0 holds k's +5) and adds 20
			close(hold.release)
			admitted := <-done
			clk.Advance(time.Second)
			bTruth := lw.truth(lw.truth(10, 2*time.Second)+20, time.Second)
			kTruth := 0.0
			if admitted {
				kTruth = lw.truth(5, 3*time.Second)
			}
			if got := s.Query(b); got < bTruth*(1-1e-6) {
				t.Errorf("Query(B) = %v < its true score %v (k admitted: %v): the undo took B's mass", got, bTruth, admitted)
			}
			if got := s.Query(k); got < kTruth*(1-1e-6) {
				t.Errorf("Query(k) = %v < its true score %v", got, kTruth)
			}
		})
	}
}

// TestReplayRefundAtNewerStamp: Refund of a receipt whose cells another
// key's Update has since moved to a later stamp keeps the increment (an
// over-estimate: the roll-back cannot know what a clamp or the law did
// meanwhile) and says so; a refund right away restores the cells exactly;
// a refund in the same millisecond after another key's write subtracts
// exactly; and a second Refund of one receipt does nothing.
func TestReplayRefundAtNewerStamp(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 1e6, Decay: decay.Exponential(1), Clock: clk})
	rc, ok := core.SketchOf(s).TryReserveAt(clk.Now(), []byte("k"), 4, 100)
	if !ok {
		t.Fatal("TryReserve denied")
	}
	clk.Advance(time.Second)
	s.Update([]byte("b"), 3)
	if core.SketchOf(s).Refund(&rc) {
		t.Fatal("Refund reported success on cells written at a later stamp")
	}
	kLeft := 4 * math.Exp(-1)
	if got := s.Query([]byte("b")); got < 3+kLeft || got > (3+kLeft)*(1+1e-6) {
		t.Fatalf("Query(b) = %v after k's refund, want k's remainder kept: %v", got, 3+kLeft)
	}
	base := s.Query([]byte("b"))
	rc2, _ := core.SketchOf(s).TryReserveAt(clk.Now(), []byte("k"), 2, 100)
	if !core.SketchOf(s).Refund(&rc2) {
		t.Fatal("an immediate Refund did not restore")
	}
	if got := s.Query([]byte("b")); got != base {
		t.Fatalf("Query(b) = %v after an immediate refund, want %v", got, base)
	}
	rc3, _ := core.SketchOf(s).TryReserveAt(clk.Now(), []byte("k"), 2, 100)
	s.Update([]byte("b"), 1) // same millisecond: the refund may subtract
	if !core.SketchOf(s).Refund(&rc3) {
		t.Fatal("a same-millisecond Refund after another write did not give back")
	}
	if got := s.Query([]byte("b")); got < base+1 || got > (base+1)*(1+1e-6) {
		t.Fatalf("Query(b) = %v, want %v", got, base+1)
	}
	if !core.SketchOf(s).Refund(&rc3) || s.Query([]byte("b")) < base+1 {
		t.Fatal("a second Refund of one receipt took more")
	}
}

// TestReplayNegativeDenialGivesBack replays audit 87's under-estimate:
// TryUpdate(k, -1, 0) is admitted on a snapshot of 0, CASes level 0 and
// is held before level 1; an Update(k, +3) writes both levels; k's CAS
// on level 1 fails, and its undo finds level 0 written since. Kept
// there, the -1 read as 2 for a true 3, and the retry (3 - 1 > 0) was
// denied, so the key stayed below its truth for good. A negative
// increment is now always given back (added back when the exact CAS
// cannot be made): every level reads at least the truth, 3, and at most
// the -1 given back on a decayed cell above it. With Linear(1) the
// clock moves 400 ms between k's CAS and the Update, so the add-back
// meets a cell written at a later stamp.
func TestReplayNegativeDenialGivesBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		law  decay.Decay
		move time.Duration
	}{
		{"None", decay.None(), 0},
		{"Linear(1)/same ms", decay.Linear(1), 0},
		{"Linear(1)/400ms", decay.Linear(1), 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -100, Hi: 100, Decay: tc.law, Clock: clk})
			k := []byte("k")
			hold := newHoldPoint(1, 1)
			core.SetHooks(core.SketchOf(s), core.Hooks{BeforeCAS: hold.hook})
			done := make(chan bool)
			go func() { done <- s.TryUpdate(k, -1, 0) }()
			hold.wait(t, "k's CAS on level 1")
			clk.Advance(tc.move)
			s.Update(k, 3)
			close(hold.release)
			if <-done {
				t.Fatal("TryUpdate(k, -1, 0) admitted with 3 in the cells")
			}
			// The truth: 3, written at the clock's time (the -1 never
			// happened); nothing decays after it.
			for l, c := range s.QueryDetailed(k).Levels {
				if c.Score < 3 || c.Score > 4 {
					t.Errorf("level %d reads %v after the denied TryUpdate; want 3 (the truth) up to 4 (the -1 given back undecayed)", l, c.Score)
				}
			}
			if s.TryUpdate(k, 1, 3) {
				t.Errorf("TryUpdate(k, 1, 3) admitted for a key at 3: it reads %v", s.Query(k))
			}
		})
	}
}
