package grudge_test

import (
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit76FakeClockFaces: migrating.md, "Clock": "grudgetest.FakeClock
// starts at the Unix epoch (decided here); Set takes a time.Time", and a
// FakeClock "moves only when told". A sketch on it and on a user Clock
// with Now only (read as Now().UnixMilli()) decay identically, to the
// millisecond, including across a Set back before the epoch (time
// stands still until the clock passes the high-water mark).
func TestAudit76FakeClockFaces(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	if got := clk.Now(); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("NewFakeClock().Now() = %v, want the Unix epoch", got)
	}
	if a, b := clk.Now(), clk.Now(); !a.Equal(b) {
		t.Fatalf("FakeClock moved on its own: %v then %v", a, b)
	}
	at := time.Date(2031, 7, 8, 9, 10, 11, 123456789, time.FixedZone("x", 3600))
	clk.Set(at)
	if got := clk.Now(); !got.Equal(at) {
		t.Fatalf("after Set(%v): Now() = %v", at, got)
	}
	clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := grudge.Config{Hi: 1000, Decay: grudge.Linear(1000)}
	a, b := cfg, cfg
	a.Clock, b.Clock = clk, a76UserClock{clk}
	sa, err := grudge.New(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := grudge.New(b)
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	step := func(what string, want float64) {
		t.Helper()
		if ga, gb := sa.Query(k), sb.Query(k); ga != want || gb != want {
			t.Fatalf("%s: FakeClock sketch %v, user-Clock sketch %v, want %v", what, ga, gb, want)
		}
	}
	sa.Update(k, 500)
	sb.Update(k, 500)
	step("fresh", 500)
	clk.Advance(1500 * time.Microsecond) // 1.5 ms: one whole ms
	step("+1.5ms", 499)
	clk.Advance(500 * time.Microsecond) // 2 ms
	step("+2ms", 498)
	back := clk.Now()
	clk.Set(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)) // decades back, before the epoch
	sa.Update(k, 100)
	sb.Update(k, 100)
	step("after the step back", 598)
	clk.Set(back.Add(10 * time.Millisecond))
	step("10ms past the high-water mark", 588)
}
