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

// a65Save saves a sketch of c holding pre (if non-zero) at T, with a
// write of delta to k lead ms after T during the encode; it returns the
// never-saved sketch, its clock, the snapshot and WriteTo's error.
func a65Save(t *testing.T, c a65Case, pre, delta float64, lead int64) (*sketch.Sketch, *sketchtest.FakeClock, []byte, error) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(a65T0)
	s := a65New(t, c, clk)
	if pre != 0 {
		s.UpdateString("k", pre)
	}
	w := &testhook.Writer{Hook: func() {
		clk.Set(a65T0 + lead)
		s.UpdateString("k", delta)
	}}
	_, err := s.WriteTo(w)
	return s, clk, w.Buf.Bytes(), err
}

// TestAudit65RefusalBoundary: the cases docs/snapshots.md lists. A
// positive write under None, Exponential or Linear whose read-back stays
// under Hi is taken for every lead up to 2^31 ms; a credit and a custom
// law's score are refused exactly past 2^24 ms; a Linear debt of 10
// under Hi 2000 draining 1 a ms (Hi drains to it in 1990 ms) is refused
// only past 2^24 + 1989 ms (one ms before the docs' "less than the lead
// minus 2^24 ms", the 1-ulp nudge of Undecay: logged), and every taken
// snapshot restored on a clock at T reads, from the write on, at or
// above the never-saved sketch.
func TestAudit65RefusalBoundary(t *testing.T) {
	type tc struct {
		c          a65Case
		pre, delta float64
		leads      []int64
		refused    func(lead int64) bool
	}
	never := func(int64) bool { return false }
	past24 := func(l int64) bool { return l > 1<<24 }
	leads := []int64{1, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1 << 29, 1<<31 - 10}
	for _, x := range []tc{
		{a65Case{name: "None", d: decay.None(), hi: 1e9}, 5, 3, leads, never},
		{a65Case{name: "Exp 1e-9", d: decay.Exponential(1e-9), hi: 1e9}, 5, 3, leads, never},
		{a65Case{name: "Linear 1e-3", d: decay.Linear(1e-3), hi: 1e9}, 5, 3, leads, never},
		{a65Case{name: "Linear credit", d: decay.Linear(1), lo: -1e6, hi: 1e9}, -40, -5, leads, past24},
		{a65Case{name: "custom", d: customExp56{1e-5}, hi: 1e9}, 5, 3, leads, past24},
		{a65Case{name: "Linear debt", d: decay.Linear(1000), hi: 2000}, 0, 10,
			[]int64{1 << 24, 1<<24 + 1988, 1<<24 + 1989, 1<<24 + 1990, 1<<24 + 1991, 1 << 25},
			func(l int64) bool { return l > 1<<24+1989 }},
	} {
		for _, lead := range x.leads {
			s, clk, snap, err := a65Save(t, x.c, x.pre, x.delta, lead)
			if want := x.refused(lead); (err != nil) != want || err != nil && !errors.Is(err, sketch.ErrTakeAgain) {
				t.Errorf("%s lead %d: WriteTo = %v; want refused (ErrTakeAgain) %v", x.c.name, lead, err, want)
			}
			if x.c.name == "Linear debt" && lead == 1<<24+1990 {
				t.Logf("Linear debt 10, Hi 2000 at 1/ms, lead 2^24+1990 (Hi drains to 10 in exactly lead - 2^24): WriteTo = %v", err)
			}
			if err != nil {
				continue
			}
			r, rc := a65Restore(t, x.c, snap, a65T0)
			for _, at := range []int64{a65T0 + lead, a65T0 + lead + 1, a65T0 + lead + 1500} {
				rc.Set(at)
				clk.Set(at)
				if got, want := r.QueryString("k"), s.QueryString("k"); got < want {
					t.Errorf("%s lead %d: at T%+d restored %v < never-saved %v", x.c.name, lead, at-a65T0, got, want)
				}
			}
		}
	}
}

// TestAudit65HiPathExactAtStamp: a write during the encode whose
// read-back passes Hi (Hi not a float32: 20.3, 12.1) is stated at Hi
// stamped after T; restored on a clock at T it reads Hi (rounded up) at
// T and, at the write's instant and after, at or above the never-saved
// sketch, for a sweep of leads and laws (no tolerance).
func TestAudit65HiPathExactAtStamp(t *testing.T) {
	for _, c := range []a65Case{
		{name: "Exp 0.7 Hi 20.3", d: decay.Exponential(0.7), hi: 20.3},
		{name: "Exp 37 Hi 20.3", d: decay.Exponential(37), hi: 20.3},
		{name: "Exp 1e-4 Hi 20.3", d: decay.Exponential(1e-4), hi: 20.3},
		{name: "Linear 2 Hi 12.1", d: decay.Linear(2), hi: 12.1},
		{name: "Linear 3000 Hi 12.1", d: decay.Linear(3000), hi: 12.1},
	} {
		for _, pre := range []float64{0, 5, 12.0999, 12.1, 20.29, 20.3, 25} {
			for _, delta := range []float64{1e-3, 0.3, 6, 20.3} {
				for _, lead := range []int64{1, 2, 7, 150, 1_500, 77_777, 3_000_001} {
					s, clk, snap, err := a65Save(t, c, pre, delta, lead)
					if err != nil {
						t.Fatalf("%s pre %v delta %v lead %d: %v", c.name, pre, delta, lead, err)
					}
					r, rc := a65Restore(t, c, snap, a65T0)
					if got, hi := r.QueryString("k"), float64(float32(c.hi)); got > float64(math.Nextafter32(float32(c.hi), 1e9)) {
						t.Errorf("%s: restored at T reads %v above Hi %v", c.name, got, hi)
					}
					for _, d := range []int64{0, 1, 100, 10_000} {
						rc.Set(a65T0 + lead + d)
						clk.Set(a65T0 + lead + d)
						if got, want := r.QueryString("k"), s.QueryString("k"); got < want {
							t.Errorf("%s pre %v delta %v lead %d: at the write%+d restored %v < never-saved %v", c.name, pre, delta, lead, d, got, want)
						}
					}
				}
			}
		}
	}
}
