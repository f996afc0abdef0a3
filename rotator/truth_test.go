package rotator_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// gateLaw is the identity as a custom law (so every aged, non-zero cell
// is passed to it) that holds the first evaluation of marker once armed,
// until released: a pause point inside an operation, between its loads
// and its CAS.
type gateLaw struct {
	marker  float64
	armed   *atomic.Bool
	reached chan struct{}
	release chan struct{}
	once    *sync.Once
}

func newGateLaw(marker float64) gateLaw {
	return gateLaw{marker: marker, armed: new(atomic.Bool), reached: make(chan struct{}), release: make(chan struct{}), once: new(sync.Once)}
}

func (g gateLaw) Apply(s float64, _ int64) float64 {
	if s == g.marker && g.armed.CompareAndSwap(true, false) {
		close(g.reached)
		<-g.release
	}
	return s
}

func (g gateLaw) open() { g.once.Do(func() { close(g.release) }) }

// TestRollbackAtHiRotatorRefund: a rotator Reservation refunded after
// another key's add was cut at Hi must leave that key at Hi.
func TestRollbackAtHiRotatorRefund(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Clock: clk}, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := core.RotatorOf(r).TryReserveStringAt(clk.Now(), "a", 5, 100)
	if !ok {
		t.Fatal("TryReserve denied on an empty rotator")
	}
	r.UpdateString("b", 100) // 5 + 100 cut to 100 in every generation
	if core.RotatorOf(r).Refund(&res) {
		t.Error("Refund reported giving back from cells at Hi")
	}
	if got := r.QueryString("b"); got < 100 {
		t.Fatalf("Query(b) = %v < 100 after a's refund", got)
	}
}

// TestRotateWaitsForAdmission: an admitted TryUpdate holds its stripe of
// the primary until its increment is in every younger generation, and a
// rotation closes the primary's stripes before it publishes the next set
// (docs/design.md, "Rotation and TryUpdate"). So a rotation that starts
// while an admission is still writing the younger generations completes
// only after it, the new primary holds the increment, and nothing is
// rolled back (no other key's mass can be taken out).
//
// Three generations, every key in one cell per level (M = 1). The
// youngest generation's cells hold a marker value, so the gated law holds
// A's TryUpdate inside its add to that generation, after its adds to the
// primary and the middle one.
func TestRotateWaitsForAdmission(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	law := newGateLaw(3)
	t.Cleanup(law.open)
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100, Decay: law, Clock: clk},
		Generations: 3, Period: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	cr := core.RotatorOf(r)
	cr.SetManual()
	r.UpdateString("m", 7)
	cr.Rotate()            // [7, 7, 0]
	r.UpdateString("m", 3) // [10, 10, 3]: the youngest holds the marker
	clk.Advance(time.Millisecond)
	law.armed.Store(true)
	done := make(chan bool)
	go func() { done <- r.TryUpdateString("a", 5, 100) }()
	select {
	case <-law.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("A never reached its add to the youngest generation")
	}
	rotated := make(chan struct{})
	go func() { defer close(rotated); cr.Rotate() }()
	select {
	case <-rotated:
		t.Fatal("a rotation completed while an admitted TryUpdate was still writing the younger generations")
	case <-time.After(50 * time.Millisecond):
	}
	if p := cr.Stats().Promotions; p != 1 {
		t.Fatalf("Promotions = %d while A is held, want 1 (the first Rotate only)", p)
	}
	law.open()
	if !<-done {
		t.Error("A denied at 10 + 5 <= 100 by the primary it decided on")
	}
	<-rotated
	// The middle generation, primary now, holds A's 5.
	if got := r.QueryString("a"); got != 15 {
		t.Fatalf("Query(a) = %v on the new primary, want 10 + 5 = 15", got)
	}
	r.UpdateString("b", 100) // 15 + 100 cut to 100
	if got := r.QueryString("b"); got < 100 {
		t.Fatalf("Query(b) = %v < 100, what b alone wrote", got)
	}
}
