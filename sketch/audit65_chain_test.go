package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit65ChainNeverBelowNeverSaved: a sketch with k updated before T
// and, during the encode, an admitted TryUpdate of k and an Update of
// k2 (Hi path and plain path alike), is saved, restored on a clock
// behind, at and ahead of T, saved again at once (the restored cells
// stamped after the restore's time are written again during nothing:
// their negative ages must come out the same), and restored again on the
// same clock. From the later write on, both restored sketches read k
// and k2 at or above the never-saved sketch on the restore's time line.
func TestAudit65ChainNeverBelowNeverSaved(t *testing.T) {
	for _, c := range []a65Case{
		{name: "Exp 0.7 Hi 20", d: decay.Exponential(0.7), hi: 20},
		{name: "Exp 0.7", d: decay.Exponential(0.7), hi: 1e9},
		{name: "Linear 2 Hi 12.1", d: decay.Linear(2), hi: 12.1},
		{name: "Linear 2 credit", d: decay.Linear(2), lo: -100, hi: 1e9},
		{name: "None Hi 20", d: decay.None(), hi: 20},
		{name: "custom", d: customExp56{0.7}, hi: 1e9},
	} {
		for _, lead := range []int64{1, 900, 1<<24 - 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(a65T0 - 100)
			s := a65New(t, c, clk)
			s.UpdateString("k", 15)
			s.UpdateString("k2", 15)
			if c.lo < 0 {
				s.UpdateString("c", -40)
			}
			clk.Set(a65T0)
			w := &testhook.Writer{Hook: func() {
				clk.Set(a65T0 + lead/2)
				if !s.TryUpdateString("k", 6, 1e9) {
					t.Errorf("%s: TryUpdate refused", c.name)
				}
				clk.Set(a65T0 + lead)
				s.UpdateString("k2", 6)
				if c.lo < 0 {
					s.UpdateString("c", -1)
				}
			}}
			if _, err := s.WriteTo(w); err != nil {
				t.Fatalf("%s lead %d: %v", c.name, lead, err)
			}
			// The never-saved sketch's readings, its clock moving forward
			// only (a sketch never reads a time before one it used).
			ats := []int64{a65T0 + lead, a65T0 + lead + 1, a65T0 + lead + 700, a65T0 + lead + 9_000}
			wants := map[int64]map[string]float64{}
			for _, at := range ats {
				clk.Set(at)
				wants[at] = map[string]float64{}
				for _, key := range []string{"k", "k2", "c"} {
					wants[at][key] = s.QueryString(key)
				}
			}
			for _, shift := range []int64{-7_000, 0, 3_000} {
				R := a65T0 + shift
				r1, rc1 := a65Restore(t, c, w.Buf.Bytes(), R)
				snap2, err := r1.MarshalBinary()
				if err != nil {
					t.Fatalf("%s lead %d shift %d: second save: %v", c.name, lead, shift, err)
				}
				r2, rc2 := a65Restore(t, c, snap2, R)
				// The restore's time line: a clock behind T starts at
				// T's state; ahead, it has aged by the downtime.
				off := max(0, a65T0-R)
				for _, at := range ats {
					if at < R {
						continue
					}
					rc1.Set(at - off)
					rc2.Set(at - off)
					for _, key := range []string{"k", "k2", "c"} {
						want := wants[at][key]
						for i, r := range []*sketch.Sketch{r1, r2} {
							if got := r.QueryString(key); got < want {
								t.Errorf("%s lead %d restore T%+d, restore #%d: %s at T%+d reads %v < never-saved %v", c.name, lead, shift, i+1, key, at-a65T0, got, want)
							}
						}
					}
				}
			}
		}
	}
}
