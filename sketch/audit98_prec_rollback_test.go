package sketch_test

// Audit 98: roll-backs under every law, against the exact oracle.
//
// Contract: docs/precision.md, "so does every roll-back (a TryUpdate's
// undo ...): each one restores a cell exactly or leaves the increment in
// it, whatever the law or the clamps"; docs/design.md, "Writers outside
// the stripe, and the roll-back" (rule 2: restore is the replaced value
// decayed to the stored stamp and rounded up; rule 3: the same
// millisecond, below Hi; rule 4: otherwise keep the increment); sketch
// doc.go "Never below the truth ... whatever the collisions, clamps,
// roll-backs". Every interleaving is forced with the core's test hooks:
// X's TryUpdate loses its level-1 CAS to Y's Update (at X's millisecond,
// or a few ms later), and while X undoes level 0 a key Z on that cell
// writes nothing, writes at the same ms, writes later, or pins it at Hi.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a98Cells(s *sketch.Sketch, key string) []uint32 {
	d := s.QueryDetailed([]byte(key))
	out := make([]uint32, len(d.Levels))
	for i, lv := range d.Levels {
		out[i] = lv.Index
	}
	return out
}

// a98Find returns a key prefix-i whose cells satisfy want, on a stripe no
// earlier key took (so that their TryUpdates do not serialize).
func a98Find(t *testing.T, s *sketch.Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) string {
	t.Helper()
	for i := range 100_000 {
		k := fmt.Sprintf("%s-%d", prefix, i)
		st := core.StripeOf(core.SketchOf(s), []byte(k))
		if used[st] || !want(a98Cells(s, k)) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return ""
}

func TestAudit98PrecRollbackEveryLawNeverBelow(t *testing.T) {
	type zAct struct {
		name  string
		later int64   // ms after X's time that Z writes (-1: Z does not write)
		d     float64 // Z's delta; 0 with later >= 0 pins the cell at Hi
	}
	zActs := []zAct{{"none", -1, 0}, {"same-ms", 0, 0.3}, {"later", 7, 0.3}, {"hi", 0, 0}}
	his := []float64{1e9, 3.3}
	xds := []float64{0.1, 1.0 / 3, 1e6 + 0.3, 1<<24 + 1}
	for _, lw := range a98Laws() {
		for _, hi := range his {
			for _, yLater := range []int64{0, 5} {
				for _, za := range zActs {
					for _, xd := range xds {
						if lw.whole {
							xd = max(math.Round(xd), 1)
						}
						name := fmt.Sprintf("%s/hi=%g/y+%d/z=%s/x=%g", lw.name, hi, yLater, za.name, xd)
						t.Run(name, func(t *testing.T) {
							a98Rollback(t, lw, hi, yLater, za.later, za.d, xd)
						})
					}
				}
			}
		}
	}
}

func a98Rollback(t *testing.T, lw *a98Law, hi float64, yLater, zLater int64, zd, xd float64) {
	clk := sketchtest.NewFakeClock()
	const t0 = 1_000_000
	clk.Set(t0)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: lw.d, Hi: hi, Clock: clk})
	used := map[uint64]bool{}
	x := a98Find(t, s, "x", used, func([]uint32) bool { return true })
	cx := a98Cells(s, x)
	y := a98Find(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
	z := a98Find(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
	evs := map[string][]a98Ev{}
	write := func(k string, d float64, at int64) {
		s.UpdateAt(time.UnixMilli(at), k, d)
		evs[k] = append(evs[k], a98Ev{at, d})
	}
	// Earlier mass on every cell, written 40 ms before, so that decay
	// enters the restore.
	clk.Set(t0 - 40)
	write(x, 0.2, t0-40)
	write(y, 0.7, t0-40)
	write(z, 1.25, t0-40)
	clk.Set(t0)
	yd := 1.0
	if lw.whole && zd != 0 {
		zd = max(math.Round(zd), 1)
	}
	var conflicts, rollbacks int
	core.SetHooks(core.SketchOf(s), core.Hooks{
		BeforeCAS: func(l uint32) {
			if l == 1 && conflicts == 0 {
				conflicts++
				clk.Set(t0 + yLater)
				write(y, yd, t0+yLater)
			}
		},
		Rollback: func(l uint32) {
			if l == 0 && rollbacks == 0 {
				rollbacks++
				if zLater >= 0 {
					at := max(t0+zLater, clk.NowMillis())
					clk.Set(at)
					d := zd
					if d == 0 {
						d = 2 * hi // pins the cell at Hi
					}
					write(z, d, at)
				}
			}
		},
	})
	ok := s.TryUpdateAt(time.UnixMilli(t0), x, xd, 1e300)
	core.SetHooks(core.SketchOf(s), core.Hooks{})
	if conflicts != 1 || rollbacks != 1 {
		t.Fatalf("the interleaving did not happen: %d conflicts, %d roll-backs", conflicts, rollbacks)
	}
	if ok {
		evs[x] = append(evs[x], a98Ev{t0, xd})
	} else {
		t.Fatalf("TryUpdate(x, %g, 1e300) denied", xd)
	}
	for _, later := range []int64{0, 1, 1000, 1 << 24} {
		now := clk.NowMillis() + later
		clk.Set(now)
		for _, k := range []string{x, y, z} {
			got := s.QueryString(k)
			tr := lw.truth(evs[k], 0, hi, now)
			if a98Below(got, tr) {
				t.Errorf("+%d ms: Query(%s) = %.17g, below the exact truth %s (levels %+v)", now-t0, k, got, tr.Text('g', 20), s.QueryDetailed([]byte(k)).Levels)
			}
		}
	}
}
