package meter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55FixedLiveNoveltyFalseNegativeAfterSave (fixed: promotions are no longer held off
// during WriteTo, which fails instead): a Novelty (T = 100
// ms, PeriodWindows 1) is saved at +99 ms; its encode takes until +101 ms
// (no clock anomaly: the deadline at +100 passes during it) and k is
// marked (Seen) at +101. The promotion is delayed to the first operation
// after WriteTo, whose newborn lacks the mark: from +200 ms (99 ms after
// the mark, within T) the SAME live Novelty says k is unseen, where a
// twin never saved says seen. meter/novelty.go: "no false negatives
// within T".
func TestAudit55FixedLiveNoveltyFalseNegativeAfterSave(t *testing.T) {
	const t0 = 1_700_000_000_000
	mk := func(c *sketchtest.FakeClock) *meter.Novelty {
		n, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(4, 1024), meter.WithPeriodWindows(1), meter.WithClock(c), meter.WithSeed(55))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sc, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	sc.Set(t0)
	tc.Set(t0)
	saved, twin := mk(sc), mk(tc)
	sc.Set(t0 + 99)
	if _, err := saved.WriteTo(&testhook.Writer{N: 2, Hook: func() {
		sc.Set(t0 + 101)
		saved.Seen("k")
	}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatal(err)
	}
	tc.Set(t0 + 101)
	twin.Seen("k")
	for at := int64(101); at < 201; at++ {
		sc.Set(t0 + at)
		tc.Set(t0 + at)
		if s, w := saved.Contains("k"), twin.Contains("k"); w && !s {
			t.Errorf("%d ms after marking k (T = 100 ms; the mark made while WriteTo ran across a deadline): the saved live Novelty says unseen, "+
				"a never-saved twin seen (novelty.go: \"no false negatives within T\")", at-101)
			break
		}
	}
}
