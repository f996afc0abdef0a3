package sketch_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit80ReadsCappedAtHi: docs/precision.md, "Reads capped at Hi":
// "a key at the clamp of `Hi = 0.1` reads 0.1, not 0.10000000149, and
// `TryUpdate(k, 0, Hi)` admits it"; with 1.1, 1e9+1 and 1e12 too; and "An
// infinite bound is MaxFloat32": "a key whose true score passes 3.4e38
// reads 3.4e38". Lo that no float32 holds (-0.1) clamps at or above Lo.
func TestAudit80ReadsCappedAtHi(t *testing.T) {
	for _, hi := range []float64{0.1, 1.1, 1e9 + 1, 1e12, 0x1p-149 * 3} {
		for _, law := range []decay.Decay{nil, decay.Exponential(1), decay.Linear(1e-6)} {
			fc := sketchtest.NewFakeClock()
			s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -0.1, Hi: hi, Decay: law, Clock: fc})
			if err != nil {
				t.Fatal(err)
			}
			k := []byte("k")
			s.Update(k, 2*hi+1)
			if q := s.Query(k); q != hi {
				t.Errorf("Hi=%v law %T: key at the clamp reads %v, want %v", hi, law, q, hi)
			}
			if !s.TryUpdate(k, 0, hi) {
				t.Errorf("Hi=%v: TryUpdate(k, 0, Hi) denied a key at the clamp", hi)
			}
			if q := s.UpdateAndQuery(k, 1); q != hi {
				t.Errorf("Hi=%v: UpdateAndQuery at the clamp = %v", hi, q)
			}
			s.Update(k, -(4*hi + 1e9))
			if q := s.Query(k); q < -0.1 || q > -0.099 {
				t.Errorf("Lo=-0.1: a key at the lower clamp reads %v, want in [-0.1, -0.0999]", q)
			}
		}
	}
	fc := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 8, Hi: math.Inf(1), Decay: decay.Exponential(1), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 3e38)
	s.Update(k, 3e38)
	if q := s.Query(k); q != math.MaxFloat32 {
		t.Errorf("Hi=+Inf: a score past MaxFloat32 reads %v, want MaxFloat32 %v", q, float64(math.MaxFloat32))
	}
}

// TestAudit80NonFiniteDeltaPanics: API.md: "NaN or +/-Inf delta or limit
// panics with a message that starts `sketch:`; no cell is ever left
// holding NaN or Inf."
func TestAudit80NonFiniteDeltaPanics(t *testing.T) {
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 100, Clock: sketchtest.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 5)
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, x := range bad {
		for name, op := range map[string]func(){
			"Update":          func() { s.Update(k, x) },
			"UpdateAndQuery":  func() { s.UpdateAndQuery(k, x) },
			"TryUpdate delta": func() { s.TryUpdate(k, x, 10) },
			"TryUpdate limit": func() { s.TryUpdate(k, 1, x) },
		} {
			func() {
				defer func() {
					r := recover()
					msg, _ := r.(string)
					if e, ok := r.(error); ok {
						msg = e.Error()
					}
					if r == nil || len(msg) < 7 || msg[:7] != "sketch:" {
						t.Errorf("%s(%v): recovered %v, want a panic starting \"sketch:\"", name, x, r)
					}
				}()
				op()
			}()
			if q := s.Query(k); q != 5 {
				t.Errorf("%s(%v) touched the cells: Query %v, want 5", name, x, q)
			}
		}
	}
}
