package rotator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit24StepClock moves on by step every time it is read, and counts
// the reads: an operation that reads it twice sees two times.
type audit24StepClock struct {
	sketchtest.FakeClock
	step  atomic.Int64
	reads atomic.Int64
}

func (c *audit24StepClock) NowMillis() int64 {
	c.reads.Add(1)
	c.FakeClock.Advance(time.Duration(c.step.Load()) * time.Millisecond)
	return c.FakeClock.NowMillis()
}

// TestAudit24ClockReadOnceAcrossPromotions: every operation, short and
// At forms alike, reads the clock at most once, also when it performs a
// promotion (the fresh generations take the promotion's time, not a
// reading), with a clock that moves half a period at each read.
func TestAudit24ClockReadOnceAcrossPromotions(t *testing.T) {
	clk := &audit24StepClock{}
	clk.Set(1_000_000)
	cfg := small(clk)
	cfg.Decay = decay.Linear(1000)
	r := newRotator(t, rotator.Config{Sketch: cfg, Generations: 3, Period: 100 * time.Millisecond})
	clk.step.Store(50)
	k := []byte("k")
	ops := []struct {
		name string
		f    func()
	}{
		{"Update", func() { r.Update(k, 1) }},
		{"Query", func() { r.Query(k) }},
		{"UpdateAndQuery", func() { r.UpdateAndQuery(k, 1) }},
		{"TryUpdate", func() { r.TryUpdate(k, 1, 1e6) }},
		{"TryUpdate denied", func() { r.TryUpdate(k, 1, -1) }},
		{"QueryDetailed", func() { r.QueryDetailed(k) }},
		{"UpdateAt future", func() { r.UpdateAt(clk.Now().Add(time.Hour), "k", 1) }},
		{"QueryAt future", func() { r.QueryAt(clk.Now().Add(time.Hour), "k") }},
		{"UpdateAndQueryAt future", func() { r.UpdateAndQueryAt(clk.Now().Add(time.Hour), "k", 1) }},
		{"TryUpdateAt future", func() { r.TryUpdateAt(clk.Now().Add(time.Hour), "k", 1, 1e6) }},
		{"UpdateAt stale", func() { r.UpdateAt(time.UnixMilli(0), "k", 1) }},
		{"TryUpdateAt stale", func() { r.TryUpdateAt(time.UnixMilli(0), "k", 1, 1e6) }},
	}
	for round := 0; round < 6; round++ {
		for _, op := range ops {
			before := clk.reads.Load()
			p0 := r.Stats().Promotions
			op.f()
			if got := clk.reads.Load() - before; got > 1 {
				t.Errorf("round %d: %s read the clock %d times (promotions %d -> %d); want at most 1",
					round, op.name, got, p0, r.Stats().Promotions)
			}
		}
	}
	if r.Stats().Promotions == 0 {
		t.Fatal("no promotion happened")
	}
}
