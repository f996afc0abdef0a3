package rotator_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit24FixedAtFormFarFuture: an At form's t is converted with
// time.Time.Sub, which saturates at about 292 years, so a t more than
// 292 years after the rotator's creation (the clock itself there too)
// acts at creation + 292 years: the Timebase doc says "either way t means
// what it says". UpdateAt(clk.Now()) then writes ~8 years in the past of
// the clock, promotes to there, and the next Query (at the clock) retires
// the write at once: Query reads 0 right after UpdateAt(now, k, 5).
// The short forms are right (Update then Query reads 5). Fix: Timebase
// convert (internal/core/clock.go) should not go through a saturating
// Duration (compute in ms from t.UnixMilli when there is no monotonic
// reading), and Timebase.Time's Duration(ms-anchorMs)*Millisecond wraps
// past 292 years too.
func TestAudit24FixedAtFormFarFuture(t *testing.T) {
	const start = int64(1_700_000_000_000)
	const year = int64(365 * 24 * 3600 * 1000)
	for _, years := range []int64{100, 300} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		r := newRotator(t, rotator.Config{Sketch: sketch.Config{CellsPerLevel: 1024, Hi: 1e9, Clock: clk}, Period: time.Hour})
		clk.Set(start + years*year)
		r.UpdateAt(clk.Now(), "k", 5)
		if got := r.QueryString("k"); got != 5 {
			t.Errorf("%d years on: UpdateAt(clock's Now, k, 5) then Query = %v, want 5 (Stats %+v)", years, got, r.Stats())
		}
		if got := r.QueryAt(clk.Now(), "k"); got != 5 {
			t.Errorf("%d years on: QueryAt(clock's Now) = %v, want 5", years, got)
		}
	}
}

// TestAudit24FixedAtFormFarFutureSketch: the same conversion in a
// sketch alone, with linear decay: UpdateAt(clock's Now, k, 5) 300 years
// after creation is dated about 8 years early, so an immediate Query
// reads it drained to 0, below the key's true 5.
func TestAudit24FixedAtFormFarFutureSketch(t *testing.T) {
	const start = int64(1_700_000_000_000)
	const year = int64(365 * 24 * 3600 * 1000)
	for _, years := range []int64{100, 300} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		s, err := sketch.New(sketch.Config{CellsPerLevel: 1024, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(start + years*year)
		s.UpdateAt(clk.Now(), "k", 5)
		if got := s.QueryString("k"); got != 5 {
			t.Errorf("%d years on: sketch UpdateAt(clock's Now, k, 5) then Query = %v, want 5", years, got)
		}
	}
}
