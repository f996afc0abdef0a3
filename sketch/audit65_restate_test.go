package sketch_test

import (
	"errors"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a65T0 = 5_000_000

type a65Case struct {
	name   string
	d      decay.Decay
	lo, hi float64
	cu     bool
	agg    sketch.Aggregator
}

func a65New(t *testing.T, c a65Case, clk sketch.Clock) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 512, Seed: 65, Decay: c.d, Lo: c.lo, Hi: c.hi,
		Clock: clk, Aggregator: c.agg})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// a65Restore restores snap into a fresh sketch of c on a clock at ms.
func a65Restore(t *testing.T, c a65Case, snap []byte, ms int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	rc := sketchtest.NewFakeClock()
	rc.Set(ms)
	r := a65New(t, c, rc)
	if err := r.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	return r, rc
}

// TestAudit65FixedZeroRestampReadBelowTruth (fixed in stop 47: a 0 is
// read back by a draining law too; a sweep case whose read-back passes
// Hi too far is refused, ErrTakeAgain, as documented): docs/snapshots.md,
// "Consistency under concurrent updates": "a score of 0 is 0 at every
// instant: age 0", and docs/migrating.md Stop 47: "never below the truth
// from T on". A cell that held a positive value at T and has drained to
// 0 by the time it is re-stamped during the encode (a write of delta 0,
// a non-negative delta; or a horizon sweep run by a read after a clock
// jump, no write at all) is recorded as 0 at age 0: the restored sketch
// reads 0 at T where the never-saved sketch read 10 (and the truth, the
// update completed before WriteTo, decayed to T, is 10). A 0 under a
// draining law is 0 only forward in time; read back it may have been
// anything. Before stop 47 the sweep case was refused (ErrTakeAgain).
func TestAudit65FixedZeroRestampReadBelowTruth(t *testing.T) {
	for _, c := range []struct {
		a65Case
		lead  int64
		write bool // a write of delta 0 at +lead; else a Query (sweep)
	}{
		{a65Case{name: "Linear(1) delta 0 at +20s", d: decay.Linear(1), hi: 1e9}, 20_000, true},
		{a65Case{name: "Exponential(1000) delta 0 at +1s", d: decay.Exponential(1000), hi: 1e9}, 1_000, true},
		{a65Case{name: "Linear(1) sweep after 2^30+1000 ms", d: decay.Linear(1), hi: 1e9}, 1<<30 + 1000, false},
		{a65Case{name: "Exponential(0.01) sweep after 2^30+1000 ms", d: decay.Exponential(0.01), hi: 1e9}, 1<<30 + 1000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(a65T0)
			s := a65New(t, c.a65Case, clk)
			s.UpdateString("k", 10)
			before := s.QueryString("k") // the truth at T
			w := &testhook.Writer{Hook: func() {
				clk.Set(a65T0 + c.lead)
				if c.write {
					s.UpdateString("k", 0)
				} else {
					s.QueryString("other")
				}
			}}
			if _, err := s.WriteTo(w); err != nil {
				if c.write || !errors.Is(err, sketch.ErrTakeAgain) {
					t.Fatalf("WriteTo: %v", err)
				}
				t.Logf("refused, as documented: %v", err)
				return
			}
			r, _ := a65Restore(t, c.a65Case, w.Buf.Bytes(), a65T0)
			if got := r.QueryString("k"); got < before {
				t.Errorf("restored on a clock at T: k reads %v, below the truth at T %v (the update completed before WriteTo; "+
					"docs/snapshots.md: \"a score of 0 is 0 at every instant: age 0\"; migrating.md Stop 47: \"never below the truth from T on\")", got, before)
			}
		})
	}
}

// TestAudit65FixedSweepOfDecayedCellRefused (fixed in the docs, stop
// 47: the refusal is the sound answer, and sketch.go's WriteTo now names
// it: "after a jump of hours or days, almost any score, a drained one
// and one the horizon sweep rounded up included"). The audit quoted
// sketch/sketch.go WriteTo godoc: it fails only if "a cell written after
// the jump can only be stated by its stamp (a score near Hi, a credit, a
// custom law's)", and docs/migrating.md Stop 47: "A Rate, a count-min
// limiter's small debt or a sketch under the provided laws is now
// taken". A sketch under
// Exponential(1/3600) (a 1 h Rate's law) with a key at 10 at T, Hi 1e9,
// whose clock jumps 2^30 + 1000 ms during the encode with a read there
// (the horizon sweep re-stamps the cell: 10 x e^-298, rounded up to the
// least float32 subnormal, 1.4e-45): read back over 2^30 ms it passes
// Hi, so the cell is stated by its stamp more than 2^24 ms after T and
// WriteTo is refused, though the cell was 10, nowhere near Hi, and no
// write happened.
func TestAudit65FixedSweepOfDecayedCellRefused(t *testing.T) {
	c := a65Case{name: "exp", d: decay.Exponential(1.0 / 3600), hi: 1e9}
	clk := sketchtest.NewFakeClock()
	clk.Set(a65T0)
	s := a65New(t, c, clk)
	s.UpdateString("k", 10)
	w := &testhook.Writer{Hook: func() {
		clk.Set(a65T0 + 1<<30 + 1000)
		s.QueryString("other")
	}}
	if _, err := s.WriteTo(w); !errors.Is(err, sketch.ErrTakeAgain) {
		t.Errorf("WriteTo = %v for a sketch under Exponential with a key of 10 (Hi 1e9) and only a read after a 2^30 ms jump; "+
			"want ErrTakeAgain: the swept cell's value read back passes Hi (sketch.go WriteTo)", err)
	}
}

// TestAudit65WriteDuringEncodeNeverBelowOracle: for every provided law,
// with Min/Max aggregation (sketch.Config has no conservative update), a
// key updated before T and written again (positive deltas) once or
// several times at increasing leads during the encode, restored on a
// clock at T, at the last write and after it, reads at or above an
// exact float64 oracle of the updates before T decayed to that instant
// (clamped at Hi), plus the writes made by then (the truth of the
// updates complete before WriteTo; the writes count where they happened
// before the read), and, from the last write on, at or above the
// never-saved sketch.
func TestAudit65WriteDuringEncodeNeverBelowOracle(t *testing.T) {
	type upd struct {
		at int64
		v  float64
	}
	laws := []struct {
		name string
		d    decay.Decay
		lo   float64
		hi   float64
		f    func(v float64, dt int64) float64 // exact decay
	}{
		{"None", decay.None(), 0, 1e9, func(v float64, dt int64) float64 { return v }},
		{"Exp tiny", decay.Exponential(1e-7), 0, 1e9, func(v float64, dt int64) float64 { return v * math.Exp(-1e-7*float64(dt)/1000) }},
		{"Exp 0.7", decay.Exponential(0.7), 0, 1e9, func(v float64, dt int64) float64 { return v * math.Exp(-0.7*float64(dt)/1000) }},
		{"Exp large", decay.Exponential(50), 0, 1e9, func(v float64, dt int64) float64 { return v * math.Exp(-50*float64(dt)/1000) }},
		{"Exp 0.7 Hi 20.3", decay.Exponential(0.7), 0, 20.3, func(v float64, dt int64) float64 { return v * math.Exp(-0.7*float64(dt)/1000) }},
		{"Linear 2", decay.Linear(2), 0, 1e9, func(v float64, dt int64) float64 { return math.Max(0, v-2*float64(dt)/1000) }},
		{"Linear 2 Hi 12.1", decay.Linear(2), 0, 12.1, func(v float64, dt int64) float64 { return math.Max(0, v-2*float64(dt)/1000) }},
		{"Linear 2 Lo -50", decay.Linear(2), -50, 1e9, func(v float64, dt int64) float64 { return math.Max(0, v-2*float64(dt)/1000) }},
	}
	pre := []upd{{a65T0 - 900, 9}, {a65T0 - 100, 8}}
	writes := [][]upd{
		{{150, 0.3}},
		{{10, 1}, {700, 2}, {3000, 0.5}},
		{{1 << 24, 4}},
		{{1<<24 + 5, 4}},
		{{1 << 26, 1}, {1<<26 + 10, 30}},
	}
	for _, lw := range laws {
		for _, cu := range []bool{false} {
			for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max} {
				c := a65Case{name: lw.name, d: lw.d, lo: lw.lo, hi: lw.hi, cu: cu, agg: agg}
				for wi, ws := range writes {
					clk := sketchtest.NewFakeClock()
					s := a65New(t, c, clk)
					// The oracle: the key alone, exact, clamped at Hi on
					// each update.
					oracle := func(at int64, upto int64) float64 {
						v, last := 0.0, int64(0)
						first := true
						step := func(u upd) {
							if !first {
								v = lw.f(v, u.at-last)
							}
							first = false
							v = math.Min(v+u.v, lw.hi)
							last = u.at
						}
						for _, u := range pre {
							step(u)
						}
						for _, u := range ws {
							if a65T0+u.at <= upto {
								step(upd{a65T0 + u.at, u.v})
							}
						}
						return lw.f(v, at-last)
					}
					for _, u := range pre {
						clk.Set(u.at)
						s.UpdateString("k", u.v)
					}
					clk.Set(a65T0)
					w := &testhook.Writer{Hook: func() {
						for _, u := range ws {
							clk.Set(a65T0 + u.at)
							s.UpdateString("k", u.v)
						}
					}}
					if _, err := s.WriteTo(w); err != nil {
						if errors.Is(err, sketch.ErrTakeAgain) {
							continue // checked by the boundary test
						}
						t.Fatalf("%s cu=%v agg=%v writes %d: WriteTo: %v", lw.name, cu, agg, wi, err)
					}
					last := a65T0 + ws[len(ws)-1].at
					// The never-saved sketch read at each instant from the
					// last write on, its clock moving forward only.
					orig := map[int64]float64{}
					for _, at := range []int64{last, last + 50, last + 3000} {
						clk.Set(at)
						orig[at] = s.QueryString("k")
					}
					for _, restoreAt := range []int64{a65T0 - 5000, a65T0, a65T0 + 40} {
						r, rc := a65Restore(t, c, w.Buf.Bytes(), restoreAt)
						for _, at := range []int64{a65T0, a65T0 + 40, a65T0 + 100, last - 1, last, last + 50, last + 3000} {
							if at < max(restoreAt, a65T0) {
								continue
							}
							// A restoring clock behind T starts at T's state:
							// its reading at x stands for T + (x - restoreAt).
							rc.Set(at - max(0, a65T0-restoreAt))
							got := r.QueryString("k")
							// The truth at 'at' (writes at or before it).
							want := oracle(at, at)
							if at < a65T0+ws[0].at {
								want = oracle(at, 0)
							}
							if got < want*(1-1e-6)-1e-9 {
								t.Errorf("%s cu=%v agg=%v writes %d restore@%+d: read at T%+d: %v < oracle %v", lw.name, cu, agg, wi, restoreAt-a65T0, at-a65T0, got, want)
							}
							if o, ok := orig[at]; ok {
								if got < o {
									t.Errorf("%s cu=%v agg=%v writes %d restore@%+d: read at T%+d: %v < never-saved %v", lw.name, cu, agg, wi, restoreAt-a65T0, at-a65T0, got, o)
								}
							}
						}
					}
				}
			}
		}
	}
}
