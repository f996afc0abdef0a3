package core_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit73FixedRotatorReservedPanicKeepsStripe: the rotator's
// TryUpdateAndQueryStringAt (limit's engine call) reads the admission's
// estimate with Sketch.Reserved, which calls the aggregator, after
// tryHold returned with the primary's stripe held and BEFORE addYounger
// registers its deferred release (internal/core/rotator.go, tryUpdate:
// "_, *after = p.Reserved(&rc)" then "r.addYounger(...)"). An
// AggregateFunc that panics there leaves the stripe odd for good: every
// later admitted TryUpdate of a key on that stripe spins forever, and the
// next promotion's closeStripes waits forever for it to turn even.
//
// Promise: docs/design.md section 3, "Progress when a goroutine is
// preempted mid-commit": "A custom decay law that panics inside the
// commit still releases the stripe (deferred release)"; tryupdate.go,
// commitAndRelease: "releases the stripe ... even if a custom decay law
// or aggregator panics, so one bad call cannot wedge every later
// TryUpdate on the stripe"; rotator.go, addYounger: "releases st ...
// even if a custom decay law panics".
func TestAudit73FixedRotatorReservedPanicKeepsStripe(t *testing.T) {
	var armed atomic.Bool
	var calls atomic.Int64
	agg := func(v []float64) float64 {
		// While armed, the first call (the decision) passes and every
		// later one (Reserved, after the admission) panics.
		if armed.Load() && calls.Add(1) >= 2 {
			panic("a73 aggregator")
		}
		m := math.Inf(1)
		for _, x := range v {
			m = math.Min(m, x)
		}
		return m
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1000)
	r, err := core.NewRotator(core.RotatorConfig{Sketch: core.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.None(), AggregateFunc: agg, Clock: clk}, Generations: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const key = "victim"
	primary := r.Current().Gens[0]
	before := core.StripeSeq(primary, []byte(key))
	armed.Store(true)
	msg := sketchtest.Panics(func() { r.TryUpdateAndQueryStringAt(clk.Now(), key, 1, 100) })
	armed.Store(false)
	if msg == "" {
		t.Fatal("the aggregator did not panic")
	}
	after := core.StripeSeq(primary, []byte(key))
	if after&1 != 0 {
		t.Fatalf("after a panicking AggregateFunc in TryUpdateAndQueryStringAt (%q), the primary's stripe seq is %d (was %d): still held, odd; "+
			"expected it released (even), as every other panic path does (design.md: \"A custom decay law that panics inside the commit still releases the stripe\"). "+
			"Every later admitted TryUpdate of a key on this stripe, and the next promotion's closeStripes, would now spin forever", msg, after, before)
	}
}
