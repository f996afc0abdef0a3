package rotator_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestPromotionKeepsTheOperationsTime: an At operation whose t falls on a
// deadline, with the clock further on, promotes at t and is decided at t:
// building the fresh generation must not read the clock, which would move
// the shared high-water mark, and so the time of every later operation at
// t, to the clock's reading (limit measured a Decision's durations from
// there: 600 ms where the bucket says 100).
func TestPromotionKeepsTheOperationsTime(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := small(clk)
	cfg.Decay = decay.Linear(1)
	r := newRotator(t, rotator.Config{Sketch: cfg, Period: period})
	t0 := clk.Now()
	r.UpdateAt(t0, "k", 100)
	at := t0.Add(period) // the first deadline
	clk.Advance(period + 500*time.Millisecond)
	r.UpdateAt(at, "k", 0) // promotes at t
	if got := r.QueryAt(at, "k"); got != 99 {
		t.Fatalf("QueryAt(the deadline) = %v, want 99 (100 less 1 s at 1/s): the promotion moved the time to the clock's reading", got)
	}
	if st := r.Stats(); st.Promotions != 1 {
		t.Fatalf("Promotions = %d, want 1", st.Promotions)
	}
	if got := r.QueryString("k"); got != 98.5 {
		t.Fatalf("Query at the clock = %v, want 98.5", got)
	}
}
