package rotator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
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

// TestPromotionAfterAPanickingBuild: a HasherFactory that panics while a
// promotion builds the fresh generation must not stop rotation for good
// (the promotion kept its claim, so no later operation could promote:
// the core concurrency audit saw 0 promotions over 5 more periods).
func TestPromotionAfterAPanickingBuild(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	var fail atomic.Bool
	xxh := sketch.XXH3()
	cfg := small(clk)
	cfg.Hasher = func(seed uint64) sketch.Hasher {
		if fail.Load() {
			panic("hasher down")
		}
		return xxh(seed)
	}
	r := newRotator(t, rotator.Config{Sketch: cfg, Period: period})
	r.UpdateString("k", 5)
	clk.Advance(period)
	fail.Store(true)
	if msg := sketchtest.Panics(func() { r.QueryString("k") }); msg == "" {
		t.Fatal("the promotion's build did not panic")
	}
	fail.Store(false)
	r.QueryString("k") // promotes now
	clk.Advance(period)
	if got := r.QueryString("k"); got != 0 {
		t.Fatalf("Query = %v two periods after the write, want 0 (forgotten)", got)
	}
	if st := r.Stats(); st.Promotions != 2 {
		t.Fatalf("Promotions = %d, want 2", st.Promotions)
	}
}
