package meter_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Novelty's godoc: Seen reports whether key was marked within the last
// T, and marks it now either way. Through the clock (Seen, not SeenAt):
// a key marked at t0 is seen at any age below T, and new again past T.
func TestAudit14MutSeenThroughTheClock(t *testing.T) {
	const T = time.Second
	for _, age := range []time.Duration{time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond, 999 * time.Millisecond} {
		clk := sketchtest.NewFakeClock()
		n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(7), meter.WithSize(2, 64))
		if err != nil {
			t.Fatal(err)
		}
		if n.Seen("k") {
			t.Fatalf("a fresh key was seen")
		}
		clk.Advance(age)
		if !n.Seen("k") {
			t.Errorf("key marked %v ago (T = %v): Seen false, want true", age, T)
		}
	}
	// Past T a key is new again (the mark has decayed below the threshold).
	clk := sketchtest.NewFakeClock()
	n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(7), meter.WithSize(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	n.Seen("k")
	clk.Advance(T + 5*time.Millisecond)
	if n.Seen("k") {
		t.Errorf("key marked %v ago (T = %v): Seen true, want false", T+5*time.Millisecond, T)
	}
	// And Seen's own mark makes the next call seen.
	if !n.Seen("k") {
		t.Errorf("Seen did not mark the key")
	}
}
