package bucket

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a90flState is every word Saturation could write: the lines and the
// floor histogram.
func a90flState(e *Engine) []uint64 {
	var s []uint64
	for i := range e.lines {
		for x := range wordsPerLine {
			s = append(s, e.lines[i].w[x].Load())
		}
	}
	for i := range e.floors.b {
		s = append(s, e.floors.b[i].Load(), e.floors.top[i].Load())
	}
	return append(s, e.floors.last.Load())
}

// TestAudit90FloorsSaturationReadsOnly: Saturation and SaturationAt, at
// every threshold and at times 2^28 to 2^40 histogram epochs after the
// last floor (where a writer would sweep), leave every line and every
// word of the floor histogram as they were (saturation.go: "it never
// writes"; floors.go: "Reading never writes").
func TestAudit90FloorsSaturationReadsOnly(t *testing.T) {
	for _, law := range []Law{Linear(1e6, 2), Linear(10, 40)} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := newTest(t, 16, law, clk)
		for k := range 400 {
			e.Update(fmt.Sprintf("k%d", k), e.q.max)
		}
		epochMs := float64(e.floors.width) / float64(e.q.gn)
		for _, ep := range []float64{0, 1 << 28, 1<<28 + 1<<27, 1 << 31, 1 << 32, 1 << 40} {
			clk.Advance(time.Duration(ep*epochMs) * time.Millisecond)
			before := a90flState(e)
			for _, n := range []float64{0, 1, e.q.max / 2, e.q.max} {
				e.Saturation(n, e.q.max)
				e.SaturationAt(clk.Now().Add(time.Hour), n, e.q.max)
				e.SaturationAt(time.Unix(0, 0), n, e.q.max)
			}
			after := a90flState(e)
			for i := range before {
				if before[i] != after[i] {
					t.Fatalf("%v, %v epochs on: Saturation changed word %d of the engine's state: %#x -> %#x", law, ep, i, before[i], after[i])
				}
			}
		}
	}
}
