package sketch_test

import (
	"math"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"pgregory.net/rapid"
)

// scriptedClock returns whatever the test scripts: jumps of any size in
// either direction, values near the int64 edges, repeats.
type scriptedClock struct{ ms atomic.Int64 }

func (c *scriptedClock) NowMillis() int64 { return c.ms.Load() }

// TestClockSafety: whatever the clock returns, the sketch stays safe: no
// cell ever holds NaN or Inf, scores stay inside [Lo, Hi], a score never
// grows without an update (decay only shrinks it toward 0), and TryUpdate
// never admits past its limit on a key nobody else writes.
func TestClockSafety(t *testing.T) {
	laws := map[string]decay.Decay{
		"none": decay.None(), "linear": decay.Linear(3), "exp": decay.Exponential(0.5),
	}
	for name, law := range laws {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				clk := &scriptedClock{}
				clk.ms.Store(rapid.Int64().Draw(t, "start"))
				const hi = 1000.0
				s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 8, Decay: law, Lo: 0, Hi: hi, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				keys := []string{"a", "b", "c"}
				admitted := 0.0 // key "z" is written only by TryUpdate
				for i := rapid.IntRange(1, 60).Draw(t, "n"); i > 0; i-- {
					switch rapid.IntRange(0, 4).Draw(t, "op") {
					case 0: // any jump, including across the int64 edges
						clk.ms.Store(rapid.Int64().Draw(t, "abs"))
					case 1:
						clk.ms.Add(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "rel"))
					case 2:
						s.UpdateString(keys[rapid.IntRange(0, 2).Draw(t, "k")], rapid.Float64Range(0, 500).Draw(t, "d"))
					case 3:
						if s.TryUpdateString("z", 1, 50) {
							admitted++
						}
					case 4:
						k := keys[rapid.IntRange(0, 2).Draw(t, "qk")]
						before := s.QueryString(k)
						after := s.QueryString(k)
						if after > before {
							t.Fatalf("score of %q grew without an update: %v -> %v", k, before, after)
						}
					}
					for _, k := range append(keys, "z") {
						for _, lv := range s.QueryDetailed([]byte(k)).Levels {
							if math.IsNaN(lv.Score) || math.IsInf(lv.Score, 0) || lv.Score < 0 || lv.Score > float64(float32(hi)) {
								t.Fatalf("key %q level %d holds %v", k, lv.Level, lv.Score)
							}
						}
					}
					if law == decay.None() && admitted > 50 {
						t.Fatalf("admitted %v > limit 50", admitted)
					}
				}
			})
		})
	}
}
