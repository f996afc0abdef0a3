package rotator_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit84coreEv struct {
	at int64
	d  float64
}

// TestAudit84CoreRotatorNeverBelow: Min never under-estimates across
// rotations and clock jumps: the primary's reading of a key is at least
// the exact decayed sum of the key's writes the primary has seen (those
// since its creation), and within float32 rounding of it.
func TestAudit84CoreRotatorNeverBelow(t *testing.T) {
	const lambda = 0.7
	for n := uint32(2); n <= 5; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 4))
			clk := sketchtest.NewFakeClock()
			clk.Set(7_000)
			const pm = 250
			r, err := rotator.New(rotator.Config{
				Sketch: sketch.Config{Levels: 2, CellsPerLevel: 256, Hi: 1e9, Decay: decay.Exponential(lambda), Clock: clk,
					Hasher: func(uint64) sketch.Hasher { return audit84coreIdx{} }},
				Generations: n, Period: pm * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			born := make([]int64, n) // creation time of each live generation
			for i := range born {
				born[i] = 7_000
			}
			deadline, hw := int64(7_000+pm), int64(7_000)
			var evs [8][]audit84coreEv
			for i := range 4000 {
				switch x := rng.IntN(100); {
				case x < 60:
					clk.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
				case x < 70:
					clk.Advance(-time.Duration(rng.IntN(400)) * time.Millisecond)
				case x < 72:
					clk.Advance(time.Duration(rng.IntN(100_000)) * time.Millisecond)
				}
				hw = max(hw, clk.NowMillis())
				for hw >= deadline {
					k := (hw-deadline)/pm + 1
					deadline += k * pm
					drop := min(k, int64(n))
					born = born[drop:]
					for int64(len(born)) < int64(n) {
						// a generation built by the promotion at hw
						born = append(born, hw)
					}
				}
				k := rng.IntN(8)
				key := "k" + strconv.Itoa(k)
				if rng.IntN(3) > 0 {
					d := rng.Float64() * 10
					if rng.IntN(2) == 0 {
						r.UpdateString(key, d)
					} else {
						r.UpdateAt(clk.Now(), key, d)
					}
					evs[k] = append(evs[k], audit84coreEv{hw, d})
					continue
				}
				var truth float64
				for _, e := range evs[k] {
					if e.at >= born[0] {
						truth += e.d * math.Exp(-lambda*float64(hw-e.at)/1000)
					}
				}
				got := r.QueryString(key)
				if got < truth*(1-1e-12) || got > truth*(1+1e-5)+1e-30 {
					t.Fatalf("step %d %s: read %v, truth %v (primary born %d, now %d)", i, key, got, truth, born[0], hw)
				}
			}
		})
	}
}

// TestAudit84CoreRotatorPanics: NaN or ±Inf delta or limit panics with a
// message starting "sketch:" on every rotator entry point, and no cell of
// any generation is changed or left non-finite.
func TestAudit84CoreRotatorPanics(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 3, CellsPerLevel: 1, Lo: -10, Hi: 10, Clock: clk},
		Generations: 3, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("v", 4)
	k := "v"
	calls := map[string]func(float64){
		"Update":                func(v float64) { r.Update([]byte(k), v) },
		"UpdateString":          func(v float64) { r.UpdateString(k, v) },
		"UpdateAt":              func(v float64) { r.UpdateAt(clk.Now(), k, v) },
		"UpdateAndQuery":        func(v float64) { r.UpdateAndQuery([]byte(k), v) },
		"UpdateAndQueryString":  func(v float64) { r.UpdateAndQueryString(k, v) },
		"UpdateAndQueryAt":      func(v float64) { r.UpdateAndQueryAt(clk.Now(), k, v) },
		"TryUpdate/delta":       func(v float64) { r.TryUpdate([]byte(k), v, 5) },
		"TryUpdate/limit":       func(v float64) { r.TryUpdate([]byte(k), 1, v) },
		"TryUpdateString/delta": func(v float64) { r.TryUpdateString(k, v, 5) },
		"TryUpdateString/limit": func(v float64) { r.TryUpdateString(k, 1, v) },
		"TryUpdateAt/delta":     func(v float64) { r.TryUpdateAt(clk.Now(), k, v, 5) },
		"TryUpdateAt/limit":     func(v float64) { r.TryUpdateAt(time.Time{}, k, 1, v) },
	}
	for name, f := range calls {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			msg := sketchtest.Panics(func() { f(v) })
			if !strings.HasPrefix(msg, "sketch:") {
				t.Errorf("%s(%v): panic %q; want a message starting \"sketch:\"", name, v, msg)
			}
			if got := r.QueryString(k); got != 4 {
				t.Fatalf("%s(%v): key reads %v after the panic; want 4", name, v, got)
			}
		}
	}
	// Every generation: rotate through them all and read.
	for range 3 {
		clk.Advance(time.Second)
		q := r.QueryDetailed([]byte(k))
		for _, l := range q.Levels {
			if math.IsNaN(l.Score) || math.IsInf(l.Score, 0) {
				t.Fatalf("a generation holds %v", l.Score)
			}
		}
	}
}
