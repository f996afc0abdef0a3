package atomiccell_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// atomiccell/doc.go, "Word layout": score bits 63..32, stamp 31..0.
func TestAudit43WordLayout(t *testing.T) {
	w := atomiccell.Pack(1.5, 0xDEADBEEF)
	if uint64(w)>>32 != uint64(math.Float32bits(1.5)) || uint32(w) != 0xDEADBEEF {
		t.Errorf("Pack(1.5, 0xDEADBEEF) = %#x; doc: score bits high, stamp low", uint64(w))
	}
	if w.Score() != 1.5 || w.Stamp() != 0xDEADBEEF {
		t.Errorf("Score/Stamp %v %#x", w.Score(), w.Stamp())
	}
}

// "Elapsed time is int32(now - stamp) ... A difference <= 0 is zero
// elapsed time"; "the relative clock may wrap past 2^32 ms".
func TestAudit43ElapsedNewer(t *testing.T) {
	cases := []struct {
		stamp, now uint32
		want       int64
	}{
		{0, 0, 0}, {3, 5, 2}, {5, 3, 0}, {0xFFFFFFF0, 0x10, 32},
		{0, 1<<31 - 1, 1<<31 - 1}, {0, 1 << 31, 0}, {100, 99, 0},
	}
	for _, c := range cases {
		if got := atomiccell.Elapsed(c.stamp, c.now); got != c.want {
			t.Errorf("Elapsed(%#x, %#x) = %d, want %d", c.stamp, c.now, got, c.want)
		}
	}
	if atomiccell.Newer(10, 5) != 10 || atomiccell.Newer(5, 10) != 10 || atomiccell.Newer(0xFFFFFFFF, 2) != 2 {
		t.Errorf("Newer does not keep the modular later stamp")
	}
}

// "every narrowing goes through RoundUp, which maps values beyond the
// float32 range to ±MaxFloat32"; "rounding toward +Inf".
func TestAudit43RoundUp(t *testing.T) {
	for _, x := range []float64{0.1, -0.1, 1.0 / 3, -1.0 / 3, 16777217, -16777217, 1e-45, -1e-45, 1e-300, -1e-300, 3.4e38} {
		r := atomiccell.RoundUp(x)
		if float64(r) < x {
			t.Errorf("RoundUp(%v) = %v below x", x, r)
		}
		if math.IsInf(float64(r), 0) {
			t.Errorf("RoundUp(%v) infinite", x)
		}
		if n := math.Nextafter32(r, float32(math.Inf(-1))); float64(n) >= x && r != 0 {
			t.Errorf("RoundUp(%v) = %v not the least float32 >= x", x, r)
		}
	}
	for _, x := range []float64{1e39, math.MaxFloat64, math.Inf(1)} {
		if r := atomiccell.RoundUp(x); r != math.MaxFloat32 {
			t.Errorf("RoundUp(%v) = %v, doc: MaxFloat32", x, r)
		}
		if r := atomiccell.RoundUp(-x); r != -math.MaxFloat32 {
			t.Errorf("RoundUp(%v) = %v, doc: -MaxFloat32", -x, r)
		}
	}
	if !math.IsNaN(float64(atomiccell.RoundUp(math.NaN()))) {
		t.Errorf("RoundUp(NaN) not NaN")
	}
}

// The Add loop: decay, add, clamp, round up, keep the newer stamp; a
// pinned cell is not written.
func TestAudit43CellAdd(t *testing.T) {
	r := atomiccell.NewRules(decay.Linear(1), -0.1, 10)
	var c atomiccell.Cell
	w := c.Add(r, 1000, 4, c.Load())
	if w.Score() != 4 || w.Stamp() != 1000 {
		t.Fatalf("first add %v@%d", w.Score(), w.Stamp())
	}
	w = c.Add(r, 2000, 0, c.Load()) // one second of Linear(1)
	if w.Score() != 3 || w.Stamp() != 2000 {
		t.Errorf("after 1 s: %v@%d, want 3@2000", w.Score(), w.Stamp())
	}
	w = c.Add(r, 1500, 100, c.Load()) // backwards: no decay, clamp at Hi, stamp kept
	if w.Score() != 10 || w.Stamp() != 2000 {
		t.Errorf("backwards add: %v@%d, want 10@2000", w.Score(), w.Stamp())
	}
	w2 := c.Add(r, 2000, 5, c.Load())
	if w2 != w {
		t.Errorf("pinned at Hi: word changed %#x -> %#x", uint64(w), uint64(w2))
	}
	w = c.Add(r, 2000, -100, c.Load())
	if float64(w.Score()) < -0.1 {
		t.Errorf("clamped below Lo: %v", w.Score())
	}
	if w.Score() != atomiccell.RoundUp(-0.1) {
		t.Errorf("clamped at %v, want Lo rounded up %v", w.Score(), atomiccell.RoundUp(-0.1))
	}
	if got := r.Value(w, 2000); got < -0.1 {
		t.Errorf("Value %v below Lo", got)
	}
}
