package sketch_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit82Scorer interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	TryUpdate(key []byte, delta, limit float64) bool
}

// TestAudit82PublicTinyDeltasNeverBelowExact: sketch and rotator (no
// decay), a huge score then many tiny and fractional deltas through
// Update and TryUpdate: the estimate is never below the exact sum
// (sketch/doc.go: "Every add stores the least float32 at or above the
// exact sum ... a delta below half a float64 ulp of the score ... still
// counts"), and never more than one float32 step per add above it.
func TestAudit82PublicTinyDeltasNeverBelowExact(t *testing.T) {
	mk := func(kind string) audit82Scorer {
		clk := sketchtest.NewFakeClock()
		clk.Set(10_000)
		cfg := sketch.Config{Levels: 4, CellsPerLevel: 1024, Lo: -1e30, Hi: math.MaxFloat32, Clock: clk, Seed: 3}
		switch kind {
		case "sketch":
			s, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		default:
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: 2, Period: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	for _, kind := range []string{"sketch", "rotator"} {
		for _, base := range []float64{0x1p100, 1e30, 0x1p60, 1 << 24, 1e-30, -1e20} {
			for _, d := range []float64{1, 1e-3, 0.1, 5e-324, math.SmallestNonzeroFloat32} {
				s := mk(kind)
				k := []byte("key")
				s.Update(k, base)
				exact := new(big.Float).SetPrec(3000).SetFloat64(base)
				steps := 0
				prev := s.Query(k)
				for i := range 200 {
					if i%2 == 0 {
						s.Update(k, d)
					} else if !s.TryUpdate(k, d, math.MaxFloat64) {
						t.Fatalf("%s: TryUpdate denied under MaxFloat64", kind)
					}
					exact.Add(exact, new(big.Float).SetFloat64(d))
					steps++
					got := s.Query(k)
					if new(big.Float).SetFloat64(got).Cmp(exact) < 0 {
						t.Fatalf("%s: base %v + %d x %v: estimate %v below the exact sum %v", kind, base, steps, d, got, exact.Text('g', 25))
					}
					if !(got > prev) {
						t.Fatalf("%s: base %v, add #%d of %v: estimate %v did not move from %v (a positive delta below Hi changes the cell)", kind, base, steps, d, got, prev)
					}
					if float64(math.Nextafter32(float32(prev), float32(math.Inf(1)))) < got && d < math.Abs(prev)*1e-8 {
						t.Fatalf("%s: base %v, add #%d of tiny %v: estimate %v moved more than one float32 from %v", kind, base, steps, d, got, prev)
					}
					prev = got
				}
			}
		}
	}
}

// TestAudit82HiNoFloat32AndWritesThatChangeNothing: Hi that no float32
// holds (0.1, 1e12): an add past Hi stores Hi rounded up (the cell's
// bound), never more, and later positive adds at that bound, or tiny
// negative ones that round back to it, change nothing; a Query reads at
// most Hi.
func TestAudit82HiNoFloat32AndWritesThatChangeNothing(t *testing.T) {
	for _, hi := range []float64{0.1, 1e12, 3e38} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000)
		s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -1, Hi: hi, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		s.Update(k, hi*0.999999)
		s.Update(k, hi) // past Hi
		at := s.Query(k)
		if at > hi || at < float64(math.Nextafter32(float32(hi), 0)) {
			t.Errorf("Hi %v: after an add past Hi, read %v, want Hi (sketch/doc.go: \"no read exceeds Hi\")", hi, at)
		}
		for _, d := range []float64{1e-300, 1, hi, 0} {
			s.Update(k, d)
			if got := s.Query(k); got != at {
				t.Errorf("Hi %v: at the bound (%v), Update(%v) moved it to %v", hi, at, d, got)
			}
		}
		// a tiny negative delta: the exact sum rounds back up to the same float32
		s.Update(k, -1e-300)
		if got := s.Query(k); got != at {
			t.Errorf("Hi %v: at %v, Update(-1e-300) moved it to %v", hi, at, got)
		}
		if !s.TryUpdate(k, 0, math.MaxFloat64) || s.Query(k) != at {
			t.Errorf("Hi %v: TryUpdate(0) at the bound", hi)
		}
	}
}
