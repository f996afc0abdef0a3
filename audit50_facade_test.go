package grudge_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
)

// a50ExactFPR returns the per-level false-positive rate 1-(1-1/m)^h as an
// exact rational.
func a50ExactFPR(h, m uint32) *big.Rat {
	q := big.NewRat(int64(m)-1, int64(m))
	pw := big.NewRat(1, 1)
	for range h {
		pw.Mul(pw, q)
	}
	return new(big.Rat).Sub(big.NewRat(1, 1), pw)
}

// TestAudit50FixedSuggestLevelsExactBoundary (fixed: core.SuggestLevels
// compares the rate computed to 512 bits): suggest.go promises "the
// smallest number of levels L (1..8) whose false-positive probability
// (1 - (1 - 1/M)^H)^L ... is at most targetP". When targetP is exactly
// that probability for some L (a float64 that holds it exactly, as with
// M a power of two), L qualifies. The code computes the rate through
// log1p/expm1, which lands one ulp above the exact value, and answers L+1.
// grudge's textbook formula 1 - math.Pow(1-1/M, H) is exact on these.
func TestAudit50FixedSuggestLevelsExactBoundary(t *testing.T) {
	bad, n := 0, 0
	for _, m := range []uint32{2, 4, 8, 16, 32, 64, 128, 256, 1024} {
		for h := uint32(1); h <= 12; h++ {
			p := a50ExactFPR(h, m)
			pl := big.NewRat(1, 1)
			for L := uint32(1); L <= 7; L++ {
				pl.Mul(pl, p)
				f, exact := pl.Float64()
				if !exact || f <= 0 || f >= 1 {
					continue
				}
				n++
				// The reference formula, evaluated as grudge's docs state it.
				naive := math.Pow(1-math.Pow(1-1/float64(m), float64(h)), float64(L))
				if naive != f {
					continue // only the inputs where float64 evaluation is exact
				}
				if got := suggested(grudge.SuggestLevels(h, m, f)); got != L {
					bad++
					if bad <= 5 {
						t.Errorf("SuggestLevels(hotKeys=%d, cells=%d, targetP=%v): got %d, want %d: (1-(1-1/M)^H)^%d is exactly %v, which is at most targetP (suggest.go: \"the smallest number of levels L ... whose false-positive probability ... is at most targetP\")",
							h, m, f, got, L, L, f)
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d exactly representable boundary targets answered one level too many", bad, n)
	}
}

// TestAudit50SuggestLevelsGridAwayFromBoundary compares SuggestLevels with
// the reference formula (evaluated in big.Float at 200 bits) over a grid
// of hot keys, cells and targets, skipping inputs within 1e-9 relative of
// a boundary (where float64 rounding decides).
func TestAudit50SuggestLevelsGridAwayFromBoundary(t *testing.T) {
	testsize.Serial(t)
	hs := []uint32{1, 2, 3, 10, 100, 1000, 10_000, 100_000, 1 << 20, math.MaxUint32}
	ms := []uint32{1, 2, 3, 7, 100, 1000, 100_000, 1 << 20, math.MaxUint32}
	ps := []float64{1e-300, 1e-12, 1e-6, 1e-3, 0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 0.999999}
	checked := 0
	for _, h := range hs {
		for _, m := range ms {
			// per-level rate 1-(1-1/m)^h = -expm1(h*log1p(-1/m)), in float64
			// but cross-checked against big arithmetic for small h.
			per := -math.Expm1(float64(h) * math.Log1p(-1/float64(m)))
			if m == 1 {
				per = 1
			}
			if h <= 64 && m <= 1<<20 {
				bf, _ := a50ExactFPR(h, m).Float64()
				if math.Abs(bf-per) > 1e-14*bf {
					t.Fatalf("h=%d m=%d: float per-level %v, exact %v", h, m, per, bf)
				}
			}
			for _, p := range ps {
				want := uint32(8)
				skip := false
				for L := 1; L <= 7; L++ {
					r := math.Pow(per, float64(L))
					if math.Abs(r-p) <= 1e-9*p {
						skip = true
					}
					if r <= p {
						want = uint32(L)
						break
					}
				}
				if skip {
					continue
				}
				checked++
				if got := suggested(grudge.SuggestLevels(h, m, p)); got != want {
					t.Errorf("SuggestLevels(%d, %d, %v) = %d, want %d", h, m, p, got, want)
				}
				got, err := grudge.SuggestLevels(h, m, p)
				if err != nil || got != want {
					t.Errorf("SuggestLevels(%d, %d, %v) = %d, %v; want %d, nil", h, m, p, got, err, want)
				}
				if s := sketch.SuggestLevels(h, m, p); s != want {
					t.Errorf("sketch.SuggestLevels(%d, %d, %v) = %d, want %d", h, m, p, s, want)
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d inputs checked", checked)
	}
	// Degenerate inputs.
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{0, 10, 0.1}, {10, 0, 0.1}, {10, 10, 0}, {10, 10, 1}, {10, 10, -0.5}, {10, 10, 2}, {10, 10, math.NaN()}, {10, 10, math.Inf(1)}, {10, 10, math.Inf(-1)}} {
		if got := suggested(grudge.SuggestLevels(c.h, c.m, c.p)); got != 0 {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, want 0", c.h, c.m, c.p, got)
		}
		if got, err := grudge.SuggestLevels(c.h, c.m, c.p); got != 0 || err == nil {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, %v; want 0 and an error", c.h, c.m, c.p, got, err)
		}
	}
}

// TestAudit50FixedSketchSuggestLevelsNoHotKeysOneCell (fixed: no hot keys
// have rate 0): sketch/config.go
// says of sketch.SuggestLevels "here no hot keys need one level". With one
// cell per level, 0 * log1p(-1) is 0 * -Inf = NaN, no level compares at
// most the target, and it answers MaxLevels (8).
func TestAudit50FixedSketchSuggestLevelsNoHotKeysOneCell(t *testing.T) {
	for _, p := range []float64{0.5, 0.01} {
		if got := sketch.SuggestLevels(0, 1, p); got != 1 {
			t.Errorf("sketch.SuggestLevels(0 hot keys, 1 cell, %v) = %d, want 1 (sketch/config.go: \"here no hot keys need one level\"; (1-(1-1/1)^0)^1 = 0)",
				p, got)
		}
	}
	// Any other cell count does answer 1.
	if got := sketch.SuggestLevels(0, 2, 0.5); got != 1 {
		t.Errorf("sketch.SuggestLevels(0, 2, 0.5) = %d, want 1", got)
	}
}

// TestAudit50FixedAtFormsFractionalAnchor (fixed: the Timebase anchors at
// the start of its millisecond, core.anchorOf): a grudgetest.FakeClock keeps
// sub-millisecond parts. When the sketch is built while the clock has a
// fraction (here 0.5 ms), the Timebase anchors to that time.Time, and an At
// form given the clock's own Now() at a smaller fraction converts one
// millisecond early (internal/core/clock.go convert: Sub(anchor) truncated
// to ms, anchorMs the floor). Promises:
//   - API.md: "the short forms are the explicit ones at the clock's now";
//     "a fake clock's Now() ... mean[s] what [it] says".
//   - docs/migrating.md: "A time.Time from time.Now(), from the FakeClock
//     or stored means what it says."
//   - API.md: "Min aggregation never under-estimates".
//
// An UpdateAt(clock.Now()) is stamped a millisecond before the clock's
// reading, so the short Query right after has already decayed it.
func TestAudit50FixedAtFormsFractionalAnchor(t *testing.T) {
	t.Run("sketch", func(t *testing.T) {
		c := grudgetest.NewFakeClock()
		c.Advance(500 * time.Microsecond) // the sketch is built at 0.5 ms
		s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1000, Decay: grudge.Linear(1000), Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(2700 * time.Microsecond) // 3.2 ms: NowMillis 3
		n := s.Native()
		n.UpdateAt(c.Now(), "k", 10) // an event now, at 3.2 ms
		if got := s.Query([]byte("k")); got < 10 {
			t.Errorf("UpdateAt(clock.Now()=3.2ms, k, 10) then Query() at the same instant (NowMillis %d) = %v, want >= 10 (no time passed; Linear(1000) drains 1 per ms): the update was stamped 1 ms early. API.md: \"the short forms are the explicit ones at the clock's now\", \"Min aggregation never under-estimates\"",
				c.NowMillis(), got)
		}
	})
	t.Run("short-vs-at", func(t *testing.T) {
		c := grudgetest.NewFakeClock()
		c.Advance(500 * time.Microsecond)
		s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1000, Decay: grudge.Linear(1000), Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		s.Update([]byte("k"), 10) // at ms 0
		c.Advance(2700 * time.Microsecond)
		at := s.Native().QueryAt(c.Now(), "k")
		short := s.Query([]byte("k"))
		if at != short {
			t.Errorf("at the clock's now (3.2 ms, NowMillis %d): QueryAt(clock.Now()) = %v, Query() = %v; want equal (API.md: \"the short forms are the explicit ones at the clock's now\")",
				c.NowMillis(), at, short)
		}
	})
	t.Run("rotator", func(t *testing.T) {
		c := grudgetest.NewFakeClock()
		c.Advance(500 * time.Microsecond)
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch: grudge.Config{Lo: 0, Hi: 1000, Decay: grudge.Linear(1000), Clock: c},
			Period: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		c.Advance(2700 * time.Microsecond)
		r.Native().UpdateAt(c.Now(), "k", 10)
		if got := r.Query([]byte("k")); got < 10 {
			t.Errorf("rotator: UpdateAt(clock.Now()) then Query() at the same instant = %v, want >= 10 (stamped 1 ms early)", got)
		}
	})
}

// TestAudit50AtFormsWholeMsAnchor is the control: built at a whole
// millisecond, the At forms at the clock's Now agree with the short forms
// whatever the fraction later.
func TestAudit50AtFormsWholeMsAnchor(t *testing.T) {
	c := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1000, Decay: grudge.Linear(1000), Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []time.Duration{3200 * time.Microsecond, 900 * time.Microsecond, 100 * time.Microsecond, 5 * time.Millisecond} {
		c.Advance(step)
		k := string(rune('a' + i))
		s.Native().UpdateAt(c.Now(), k, 10)
		if got := s.Query([]byte(k)); got != 10 {
			t.Errorf("step %d: UpdateAt(clock.Now()) then Query() = %v, want 10", i, got)
		}
		if a, b := s.Native().QueryAt(c.Now(), "a"), s.Query([]byte("a")); a != b {
			t.Errorf("step %d: QueryAt(clock.Now()) = %v, Query() = %v", i, a, b)
		}
	}
}
