package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a59Rotator is a rotator of g generations of one cell per level (every
// key collides), no decay, Hi 1000, on a fake clock.
func a59Rotator(t *testing.T, g uint32) (*core.Rotator, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch:      core.Config{Levels: 2, CellsPerLevel: 1, Decay: decay.None(), Hi: 1000, Seed: 3, Clock: clk},
		Generations: g,
		Period:      time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, clk
}

// Rotator.Refund: "a second Refund of res does nothing", and it never
// takes "another key's mass". A Reservation and a second Refund of the
// same value (through the same pointer): a colliding key's write in
// between survives, for 2..8 generations (the first two receipts inline,
// the rest in a slice).
func TestAudit59RotatorSecondRefundDoesNothing(t *testing.T) {
	for _, g := range []uint32{2, 3, 4, 8} {
		t.Run(fmt.Sprintf("G=%d", g), func(t *testing.T) {
			r, clk := a59Rotator(t, g)
			now := clk.Now()
			res, ok := r.TryReserveStringAt(now, "a", 5, 1000)
			if !ok {
				t.Fatal("denied")
			}
			r.UpdateStringAt(now, "b", 3)
			if !r.Refund(&res) {
				t.Fatal("a same-millisecond refund was not whole")
			}
			r.Refund(&res)
			if got := r.QueryStringAt(now, "b"); got != 3 {
				t.Errorf("b reads %v after a's Refund twice; want 3 (its own write)", got)
			}
		})
	}
}
