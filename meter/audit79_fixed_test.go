package meter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79FixedRateObserveAllocatesAtRotation: meter/rate.go (Rate's
// godoc) says, unconditionally, "Safe for concurrent use; Observe and
// PerSecond do not allocate." An Observe or PerSecond whose time is past
// the rotation deadline builds the new generation (a whole sketch) and
// allocates; Novelty's godoc states that exception ("it does not
// allocate, but for the call that builds a new generation, once per
// Period"), Rate's does not.
func TestAudit79FixedRateObserveAllocatesAtRotation(t *testing.T) {
	// Fixed as a doc (stop 48): rate.go now says "Observe and PerSecond
	// do not allocate, but for the call that builds a new generation,
	// once per Period", as Novelty's doc does. Within a Period: none.
	clk := sketchtest.NewFakeClock()
	window := time.Millisecond
	r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(4, 1024))
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("k") // builds what the first calls need
	obs := testing.AllocsPerRun(50, func() { r.Observe("k") })
	read := testing.AllocsPerRun(50, func() { _ = r.PerSecond("k") })
	if obs != 0 || read != 0 {
		t.Errorf("Rate within one Period: Observe %v allocs/op, PerSecond %v allocs/op; want 0 (rate.go: \"do not allocate, but for the call that builds a new generation\")", obs, read)
	}
}

// TestAudit79FixedZeroMeterAccessorsPanic: docs/migrating.md ("limit,
// meter, limit/httplimit: what changed before") says of the zero values:
// "every decision method panics: `limit: zero Limiter; use New` (likewise
// `Multi`, `Rate`, `Inflight`, `Novelty`, `httplimit.Middleware`);
// accessors return zero values". The zero Rate's Window() and
// SnapshotSize() and the zero Novelty's Within() and SnapshotSize() are
// accessors, and they panic (rate.go, Window: r.rot()). The meter's own
// godoc says "its methods panic": the two documents disagree.
func TestAudit79FixedZeroMeterAccessorsPanic(t *testing.T) {
	// Fixed as a doc (stop 48): migrating.md now says every method of a
	// zero meter panics, Window, Within and SnapshotSize included, as
	// the meters' own docs say.
	var r meter.Rate
	var n meter.Novelty
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Rate.Window":          {func() { _ = r.Window() }, "zero Rate"},
		"Rate.SnapshotSize":    {func() { _ = r.SnapshotSize() }, "zero Rate"},
		"Novelty.Within":       {func() { _ = n.Within() }, "zero Novelty"},
		"Novelty.SnapshotSize": {func() { _ = n.SnapshotSize() }, "zero Novelty"},
	} {
		if m := sketchtest.Panics(c.f); !strings.Contains(m, c.want) {
			t.Errorf("zero %s: panic %q; want one naming %q (meter's docs: \"its methods panic\")", name, m, c.want)
		}
	}
}
