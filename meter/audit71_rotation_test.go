package meter

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// No false negative within T across rotations at the shortest Period
// (PeriodWindows 1, and 1.5): a key marked at any sub-ms instant, after
// the clock has walked ms by ms from the start (rotating on access), is
// contained and seen at mark + T - 1 ns and at mark + d for d < T.
func TestAudit71NoveltyRotationEdge(t *testing.T) {
	testsize.Serial(t)
	for _, pw := range []float64{1, 1.5} {
		for _, T := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond, 5*time.Millisecond + 1} {
			Tw := a71Whole(T)
			for start := time.Duration(0); start < 4*Tw; start += 250 * time.Microsecond {
				for _, sub := range []time.Duration{0, 1, 999999} {
					for _, d := range []time.Duration{T - 1, T / 2, T - time.Millisecond + 1} {
						if d < 0 {
							continue
						}
						ac := sketchtest.NewFakeClock()
						ac.SetTime(a71Base)
						n, err := NewNovelty(T, WithSize(3, 256), WithSeed(2), WithClock(ac), WithPeriodWindows(pw))
						if err != nil {
							t.Fatal(err)
						}
						tm := a71Base
						mark := a71Base.Add(start/time.Millisecond*time.Millisecond + sub)
						for tm.Before(mark) {
							ac.SetTime(tm)
							n.ContainsAt(tm, "walk")
							tm = tm.Add(time.Millisecond)
						}
						ac.SetTime(mark)
						n.SeenAt(mark, "k")
						// walk ms by ms to the check, reading another key
						chk := mark.Add(d)
						for tm = mark; tm.Before(chk); tm = tm.Add(time.Millisecond) {
							ac.SetTime(tm)
							n.ContainsAt(tm, "walk")
						}
						ac.SetTime(chk)
						if !n.ContainsAt(chk, "k") {
							t.Errorf("pw=%v T=%v Period=%v: mark at +%v, ContainsAt(mark+%v) = false: a false negative within T", pw, T, periodOf(T, pw), mark.Sub(a71Base), d)
						}
					}
				}
			}
		}
	}
}
