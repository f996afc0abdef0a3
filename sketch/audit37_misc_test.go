package sketch_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37NonFinitePanicsBeforeTouch: NaN and ±Inf deltas and limits
// panic with a "sketch:" message on every write form, and no cell
// changes (the key's and a colliding key's levels stay as they were,
// including at Hi, at Lo and pinned at the same stamp).
func TestAudit37NonFinitePanicsBeforeTouch(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(77_000)
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 2, Lo: -5, Hi: 100, Decay: decay.Exponential(1), Clock: clk})
	s.UpdateString("a", 1000) // at Hi
	s.UpdateString("b", -1000)
	before := s.QueryDetailed([]byte("a"))
	bb := s.QueryDetailed([]byte("b"))
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	at := clk.Now()
	for _, x := range bad {
		ops := map[string]func(){
			"Update":            func() { s.Update([]byte("a"), x) },
			"UpdateString":      func() { s.UpdateString("a", x) },
			"UpdateAt":          func() { s.UpdateAt(at, "a", x) },
			"UpdateAndQuery":    func() { s.UpdateAndQuery([]byte("a"), x) },
			"UpdateAndQueryAt":  func() { s.UpdateAndQueryAt(at, "a", x) },
			"TryUpdate delta":   func() { s.TryUpdate([]byte("a"), x, 1e9) },
			"TryUpdate limit":   func() { s.TryUpdate([]byte("a"), 1, x) },
			"TryUpdateAt delta": func() { s.TryUpdateAt(at, "b", x, 1e9) },
			"TryUpdateAt limit": func() { s.TryUpdateAt(at.Add(-time.Second), "b", -1, x) },
		}
		for name, f := range ops {
			msg := sketchtest.Panics(f)
			if !strings.HasPrefix(msg, "sketch:") {
				t.Errorf("%s(%v): panic %q, want one starting \"sketch:\"", name, x, msg)
			}
		}
	}
	after := s.QueryDetailed([]byte("a"))
	ab := s.QueryDetailed([]byte("b"))
	for l := range before.Levels {
		if before.Levels[l] != after.Levels[l] || bb.Levels[l] != ab.Levels[l] {
			t.Errorf("level %d changed by a panicking call: %+v -> %+v, %+v -> %+v", l, before.Levels[l], after.Levels[l], bb.Levels[l], ab.Levels[l])
		}
	}
}

// TestAudit37TryUpdateAtOutOfOrderExact: no decay, one key, TryUpdateAt
// at times in random order (behind and ahead of the clock, the clock
// stepping back between calls): the admissions are exactly the limit and
// the estimate is exactly the admitted total, at GOMAXPROCS 1 to 8.
func TestAudit37TryUpdateAtOutOfOrderExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(10_000_000)
		s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 64, Hi: 1e9, Clock: clk})
		admitted := 0
		for i := range 3000 {
			ts := time.UnixMilli(10_000_000 + int64((i*7919)%5000) - 2500)
			if i%97 == 0 {
				clk.Set(clk.NowMillis() - 1000)
			}
			if s.TryUpdateAt(ts, "k", 1, 700) {
				admitted++
			}
		}
		if admitted != 700 || s.QueryString("k") != 700 {
			t.Fatalf("admitted %d, Query %v; want exactly 700 of limit 700 under no decay", admitted, s.QueryString("k"))
		}
	})
}
