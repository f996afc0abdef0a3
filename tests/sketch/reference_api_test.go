package sketch_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The reference has the lock-free sketch's methods, At forms included,
// on a type of its own, as the contract names it.
var (
	_ sketch.Scorer                                  = (*reference.Sketch)(nil)
	_ sketchtest.AtScorer                            = (*reference.Sketch)(nil)
	_ func(sketch.Config) (*reference.Sketch, error) = reference.New
)

// TestReferenceAtFormsMatchSketch: the same explicit-time operations on
// the reference and on the lock-free sketch, with integer deltas under
// Linear (exact in float32), read the same. The clock is moved to each t
// first: an At time ahead of the clock counts as the clock's reading.
func TestReferenceAtFormsMatchSketch(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1000, Decay: decay.Linear(1), Clock: clk}
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reference.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	for i, k := range []string{"a", "b", "c", "a"} {
		at := t0.Add(time.Duration(i) * time.Second)
		clk.SetTime(at)
		s.UpdateAt(at, k, 10)
		r.UpdateAt(at, k, 10)
	}
	at := t0.Add(5 * time.Second)
	clk.SetTime(at)
	for _, k := range []string{"a", "b", "c", "d"} {
		if a, b := s.QueryAt(at, k), r.QueryAt(at, k); a != b {
			t.Fatalf("QueryAt(t0+5s, %q): sketch %v, reference %v", k, a, b)
		}
	}
	if a, b := s.UpdateAndQueryAt(at, "b", 1), r.UpdateAndQueryAt(at, "b", 1); a != b || a != 7 {
		t.Fatalf("UpdateAndQueryAt: sketch %v, reference %v, want 7 (10 - 4 s + 1)", a, b)
	}
	// a: 10 at t0, 7 + 10 at t0+3s, 15 at t0+5s.
	if a, b := s.TryUpdateAt(at, "a", 1, 15), r.TryUpdateAt(at, "a", 1, 15); a != b || a {
		t.Fatalf("TryUpdateAt(a, 1, 15) with a at 15: sketch %v, reference %v, want false", a, b)
	}
	if a, b := s.TryUpdateAt(at, "a", 1, 16), r.TryUpdateAt(at, "a", 1, 16); a != b || !a {
		t.Fatalf("TryUpdateAt(a, 1, 16) with a at 15: sketch %v, reference %v, want true", a, b)
	}
}
