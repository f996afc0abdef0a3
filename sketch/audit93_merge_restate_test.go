package sketch_test

// Audit 93: Merge and WriteTo state a cell whose read-back passes Hi the
// same way (commit 502bb1f moved WriteTo's search into one helper,
// hiLead, that both call). A cell holding b stamped lead ms after the
// instant, b read back past Hi, becomes Hi stamped a ms after the
// instant, a the least whole ms with Hi decaying to b or more by b's
// stamp (docs/snapshots.md, "Merge": "merged as Hi stamped the least
// whole ms after the instant from which Hi decays to its value by its
// stamp, as WriteTo states such a cell"; "Consistency under concurrent
// updates"). Checked against a closed-form a (skipping cases within
// 1e-6 ms of a whole ms): the key reads exactly Hi at the instant + a and
// below Hi 1 ms later, both for a restore (on a clock at the snapshot
// instant) of a snapshot the write landed on lead ms into its encode,
// and for an empty sketch merged with a replica whose clock is lead ms
// ahead; and at b's stamp each reads at least b.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit93MergeRestateSameHiLead(t *testing.T) {
	const hi = 10.0
	laws := []struct {
		name string
		d    decay.Decay
		// span returns the ms over which Hi decays to b.
		span func(b float64) float64
	}{
		{"exp1", decay.Exponential(1), func(b float64) float64 { return math.Log(hi/b) / 1 * 1000 }},
		{"exp0.3", decay.Exponential(0.3), func(b float64) float64 { return math.Log(hi/b) / 0.3 * 1000 }},
		{"lin1000", decay.Linear(1000), func(b float64) float64 { return (hi - b) / 1000 * 1000 }},
		{"lin1", decay.Linear(1), func(b float64) float64 { return (hi - b) / 1 * 1000 }},
	}
	checked := 0
	for _, lw := range laws {
		for _, frac := range []float64{1, 0.999, 0.8, 0.5} {
			b := frac * hi
			for _, lead := range []int64{1, 3, 500, 2000, 60_000} {
				b32 := float32(b) // the cell holds b rounded up to float32
				if float64(b32) < b {
					b32 = math.Nextafter32(b32, float32(math.Inf(1)))
				}
				sp := lw.span(float64(b32))
				if sp >= float64(lead) {
					continue // read back within Hi: no Hi record
				}
				if f := sp - math.Floor(sp); f < 1e-6 || f > 1-1e-6 {
					continue // on a whole ms: rounding decides
				}
				a := lead - int64(math.Floor(sp))
				name := fmt.Sprintf("%s/b=%v/lead=%d/a=%d", lw.name, b, lead, a)
				checked++
				cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: lw.d, Lo: 0, Hi: hi, Seed: 7}

				// WriteTo, restored on a clock at T.
				co := sketchtest.NewFakeClock()
				co.Set(a93T)
				cfg.Clock = co
				orig := mustNewSketch(t, cfg)
				w := &a92Hook{f: func() {
					co.Advance(time.Duration(lead) * time.Millisecond)
					orig.UpdateString("k", b)
				}}
				if _, err := orig.WriteTo(w); err != nil {
					t.Fatalf("%s: WriteTo: %v", name, err)
				}
				cr := sketchtest.NewFakeClock()
				cr.Set(a93T)
				cfg.Clock = cr
				r := mustNewSketch(t, cfg)
				if err := r.UnmarshalBinary(w.Bytes()); err != nil {
					t.Fatalf("%s: restore: %v", name, err)
				}

				// Merge of a replica lead ms ahead into an empty sketch.
				s, cs := a93Sketch(t, lw.d, 0, hi, sketch.Min, a93T)
				o, _ := a93Sketch(t, lw.d, 0, hi, sketch.Min, a93T+lead)
				o.UpdateString("k", b)
				if err := s.Merge(o); err != nil {
					t.Fatalf("%s: Merge: %v", name, err)
				}

				for _, side := range []struct {
					who string
					sk  *sketch.Sketch
					c   *sketchtest.FakeClock
				}{{"restore", r, cr}, {"merge", s, cs}} {
					// Probes in time order (the clocks only move forward):
					// Hi at a, below Hi at a+1, at least b at b's stamp.
					probes := []int64{a, a + 1}
					if lead > a+1 {
						probes = append(probes, lead)
					}
					for _, x := range probes {
						side.c.Set(a93T + x)
						got := side.sk.QueryString("k")
						switch {
						case x == a && got != hi:
							t.Errorf("%s: %s reads %v at T+%dms, want Hi (stamped there)", name, side.who, got, x)
						case x == a+1 && !(got < hi):
							t.Errorf("%s: %s reads %v at T+%dms, want below Hi (stamped at T+%dms, not later)", name, side.who, got, x, a)
						}
						if x == lead && got < float64(b32) {
							t.Errorf("%s: %s reads %v at T+%dms, at or after b's stamp T+%dms, below b = %v", name, side.who, got, x, lead, b32)
						}
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d cases checked", checked)
	}
}
