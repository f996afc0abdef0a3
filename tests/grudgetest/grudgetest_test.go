package grudgetest_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	_ grudge.Clock  = (*grudgetest.FakeClock)(nil)
	_ grudge.Ticker = (*grudgetest.FakeTicker)(nil)
)

func TestFakeClock(t *testing.T) {
	c := grudgetest.NewFakeClock()
	if got := c.Now(); !got.Equal(time.UnixMilli(0)) {
		t.Fatalf("NewFakeClock().Now() = %v, want the Unix epoch", got)
	}
	c.Advance(1500 * time.Millisecond)
	if c.NowMillis() != 1500 || c.Now().UnixMilli() != 1500 {
		t.Fatalf("after Advance: %d ms, %v", c.NowMillis(), c.Now())
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	c.Set(at)
	if !c.Now().Equal(at) {
		t.Fatalf("Set(%v): Now() = %v", at, c.Now())
	}
}

// TestTickRotatesSynchronously: Tick returns once the rotation is visible,
// every time, and an unattached or stopped ticker never blocks forever.
func TestTickRotatesSynchronously(t *testing.T) {
	ft := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Lo: 0, Hi: 1}, Ticker: ft})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 50; i++ {
		ft.Tick()
		if got := r.Rotations(); got != i {
			t.Fatalf("after Tick %d: Rotations() = %d", i, got)
		}
	}
	r.Close()
	start := time.Now()
	ft.Tick() // stopped: returns at once
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Tick after Stop took %v", d)
	}
	lone := grudgetest.NewFakeTicker()
	lone.Tick() // nobody reads: waits at most a second
	lone.Tick() // the first is still pending: dropped at once
}
