package sketch_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit84coreBadCalls lists every entry point of s given a non-finite
// value in delta or limit.
func audit84coreBadCalls(s audit84coreAt, clk *sketchtest.FakeClock) map[string]func(bad float64) {
	k := "victim"
	return map[string]func(float64){
		"Update":                 func(v float64) { s.Update([]byte(k), v) },
		"UpdateString":           func(v float64) { s.UpdateString(k, v) },
		"UpdateAt":               func(v float64) { s.UpdateAt(clk.Now(), k, v) },
		"UpdateAndQuery":         func(v float64) { s.UpdateAndQuery([]byte(k), v) },
		"UpdateAndQueryString":   func(v float64) { s.UpdateAndQueryString(k, v) },
		"UpdateAndQueryAt":       func(v float64) { s.UpdateAndQueryAt(clk.Now(), k, v) },
		"TryUpdate/delta":        func(v float64) { s.TryUpdate([]byte(k), v, 1e9) },
		"TryUpdate/limit":        func(v float64) { s.TryUpdate([]byte(k), 1, v) },
		"TryUpdateString/delta":  func(v float64) { s.TryUpdateString(k, v, 1e9) },
		"TryUpdateString/limit":  func(v float64) { s.TryUpdateString(k, 1, v) },
		"TryUpdateAt/delta":      func(v float64) { s.TryUpdateAt(clk.Now(), k, v, 1e9) },
		"TryUpdateAt/limit":      func(v float64) { s.TryUpdateAt(clk.Now(), k, 1, v) },
		"TryUpdateAt/future":     func(v float64) { s.TryUpdateAt(clk.Now().Add(time.Hour), k, 1, v) },
		"UpdateAt/past":          func(v float64) { s.UpdateAt(time.Time{}, k, v) },
		"TryUpdate/both":         func(v float64) { s.TryUpdate([]byte(k), v, v) },
		"TryUpdate/negZeroDelta": func(v float64) { s.TryUpdate([]byte(k), math.Copysign(0, -1), v) },
	}
}

// TestAudit84CorePanics: API.md: "NaN or +/-Inf delta or limit panics with
// a message that starts `sketch:`; no cell is ever left holding NaN or
// Inf", on every entry point, the At forms and the string twins included.
func TestAudit84CorePanics(t *testing.T) {
	for _, name := range []string{"lockfree", "reference"} {
		for _, hi := range []float64{100, math.Inf(1)} {
			clk := sketchtest.NewFakeClock()
			clk.Set(10_000)
			cfg := sketch.Config{Levels: 4, CellsPerLevel: 1, Lo: -50, Hi: hi, Decay: decay.Exponential(0.5), Clock: clk}
			var s audit84coreAt
			if name == "lockfree" {
				s, _ = sketch.New(cfg)
			} else {
				s, _ = reference.New(cfg)
			}
			s.UpdateString("victim", 7)
			for op, f := range audit84coreBadCalls(s, clk) {
				for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
					before := s.QueryDetailed([]byte("victim"))
					msg := sketchtest.Panics(func() { f(v) })
					if !strings.HasPrefix(msg, "sketch:") {
						t.Errorf("%s hi=%v %s(%v): panic %q; want a message starting \"sketch:\"", name, hi, op, v, msg)
					}
					after := s.QueryDetailed([]byte("victim"))
					if fmt.Sprint(before) != fmt.Sprint(after) {
						t.Errorf("%s hi=%v %s(%v): cells changed %v -> %v", name, hi, op, v, before, after)
					}
					for _, l := range after.Levels {
						if math.IsNaN(l.Score) || math.IsInf(l.Score, 0) {
							t.Fatalf("%s %s(%v): cell holds %v", name, op, v, l.Score)
						}
					}
				}
			}
			// Finite extremes never leave Inf behind.
			for _, d := range []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64} {
				s.UpdateString("victim", d)
				s.UpdateAndQueryAt(clk.Now(), "victim", d)
				s.TryUpdateString("victim", d, math.MaxFloat64)
				s.TryUpdateAt(clk.Now(), "victim", d, -math.MaxFloat64)
				for _, l := range s.QueryDetailed([]byte("victim")).Levels {
					if math.IsNaN(l.Score) || math.IsInf(l.Score, 0) {
						t.Fatalf("%s hi=%v after delta %v: cell holds %v", name, hi, d, l.Score)
					}
				}
			}
		}
	}
}
