package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84CoreShortIsAtNow: "the short forms are the explicit ones at
// the clock's now" (API.md), and "a fake clock's Now() and a stored wall
// time mean what they say": three sketches on one fake clock, driven with
// the short forms, with At(clk.Now()) and with At(time.UnixMilli(reading)),
// agree on every result, whatever the clock does (sub-millisecond
// advances, negative readings, steps back, long jumps). Also for rotators.
func TestAudit84CoreShortIsAtNow(t *testing.T) {
	for _, start := range []int64{0, -3_000_000_007, 1_700_000_000_123} {
		for _, rot := range []bool{false, true} {
			t.Run(fmt.Sprint(start, rot), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(start), 3))
				clk := sketchtest.NewFakeClock()
				clk.Set(start)
				clk.Advance(time.Duration(rng.Int64N(1e6))) // a fraction at creation
				cfg := sketch.Config{Levels: 2, CellsPerLevel: 32, Lo: -50, Hi: 500, Decay: decay.Exponential(0.9), Clock: clk}
				mk := func() audit84coreAt {
					if rot {
						r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: 3, Period: 700 * time.Millisecond})
						if err != nil {
							t.Fatal(err)
						}
						return r
					}
					s, err := sketch.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				a, b, c := mk(), mk(), mk()
				for i := range 3000 {
					switch x := rng.IntN(10); {
					case x < 5:
						clk.Advance(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
					case x < 6:
						clk.Advance(-time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
					case x < 7:
						clk.Advance(time.Duration(rng.Int64N(int64(5 * time.Second))))
					}
					k := fmt.Sprint("k", rng.IntN(10))
					d := float64(rng.IntN(40) - 10)
					lim := float64(rng.IntN(300))
					now, wall := clk.Now(), time.UnixMilli(clk.NowMillis())
					var x, y, z any
					switch rng.IntN(4) {
					case 0:
						a.UpdateString(k, d)
						b.UpdateAt(now, k, d)
						c.UpdateAt(wall, k, d)
					case 1:
						x, y, z = a.QueryString(k), b.QueryAt(now, k), c.QueryAt(wall, k)
					case 2:
						x, y, z = a.UpdateAndQueryString(k, d), b.UpdateAndQueryAt(now, k, d), c.UpdateAndQueryAt(wall, k, d)
					case 3:
						x, y, z = a.TryUpdateString(k, d, lim), b.TryUpdateAt(now, k, d, lim), c.TryUpdateAt(wall, k, d, lim)
					}
					if x != y || x != z {
						t.Fatalf("step %d (clock %d, Now %v): short %v, At(Now()) %v, At(UnixMilli) %v", i, clk.NowMillis(), now, x, y, z)
					}
				}
			})
		}
	}
}

// TestAudit84CoreIdleSweep: "Any idle time, 1 ms to years, decays as the
// reference (int64 ms) does": one write, then a read after an idle time
// around every stamp boundary, given as a stored wall time through the At
// form and through the short form, against the reference; with and without
// other keys written meanwhile (the horizon sweep).
func TestAudit84CoreIdleSweep(t *testing.T) {
	idles := []int64{1, 2, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1<<29 - 1, 1<<29 + 1, 1<<30 + 1, 1<<31 - 1, 1 << 31, 1<<31 + 1,
		1<<32 - 1, 1 << 32, 1<<32 + 1, 3 * 365 * 86_400_000, 40 * 365 * 86_400_000}
	laws := []decay.Decay{decay.Exponential(1e-9), decay.Exponential(2e-8), decay.Linear(1e-6), audit84coreHalvingSlow{}}
	for li, law := range laws {
		for _, idle := range idles {
			for _, busy := range []bool{false, true} {
				clk := sketchtest.NewFakeClock()
				clk.Set(123_456)
				cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Lo: -1e6, Hi: 1e6, Decay: law, Clock: clk}
				lf, _ := sketch.New(cfg)
				rf, _ := reference.New(cfg)
				lf.UpdateString("a", 1000)
				rf.UpdateString("a", 1000)
				lf.UpdateString("n", -1000)
				rf.UpdateString("n", -1000)
				start := clk.NowMillis()
				if busy {
					for step := int64(1 << 27); step < idle; step += 1 << 27 {
						clk.Set(start + step)
						lf.UpdateString("other", 1)
						rf.UpdateString("other", 1)
					}
				}
				clk.Set(start + idle + 5)
				for _, k := range []string{"a", "n"} {
					x := lf.QueryAt(time.UnixMilli(start+idle), k)
					y := rf.QueryAt(time.UnixMilli(start+idle), k)
					audit84coreClose(t, int(idle), fmt.Sprintf("law%d/%s/busy=%v", li, k, busy), x, y)
					x, y = lf.QueryString(k), rf.QueryString(k)
					audit84coreClose(t, int(idle), fmt.Sprintf("law%d/%s/busy=%v/short", li, k, busy), x, y)
				}
			}
		}
	}
}

// audit84coreHalvingSlow halves a score every 10^9 ms, in closed form.
type audit84coreHalvingSlow struct{}

func (audit84coreHalvingSlow) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1e9)
}
