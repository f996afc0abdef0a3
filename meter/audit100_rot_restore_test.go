package meter_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a100MeterEnv = "GRUDGE_A100_ROT_METER_CHILD"

// a100MeterChild runs body in a child process (60 s timeout; killed after testchild.Bound), so that a
// meter promoting for ever near the end of int64 time fails the test
// rather than hanging the run; in the child it runs body itself.
func a100MeterChild(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a100MeterEnv, body)
}

func a100Novelty(t *testing.T, at int64) (*meter.Novelty, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(at)
	n, err := meter.NewNovelty(10*time.Millisecond, meter.WithClock(clk), meter.WithPeriodWindows(1), meter.WithSeed(1), meter.WithSize(2, 256))
	if err != nil {
		t.Fatal(err)
	}
	return n, clk
}

// TestAudit100RotFixedNoveltyRestoreFarClock (audit 100; fixed at stop 59, the text below says
// what was wrong): a Novelty saved and
// restored with no downtime on a clock past 2^61 ms forgets a mark 2 ms
// old (T = 10 ms): a false negative. meter/doc.go: "a restored meter
// reads what the never-stopped one would"; novelty.go: "no false
// negatives within T" and "rotation adds no false negative". The
// rotator's restore loses its deadline's time left there (the snapshot
// decoder bounds wall times to +-2^61 ms), so the restored primary
// retires at once. T = Period = 10 ms, N = 2: built at s, "a" seen at
// s + 9, a promotion at s + 10, saved and restored at s + 11.
func TestAudit100RotFixedNoveltyRestoreFarClock(t *testing.T) {
	for _, s := range []int64{1_765_000_000_000, 1 << 62, math.MaxInt64 - 15} {
		n, clk := a100Novelty(t, s)
		clk.Set(s + 9)
		n.Seen("a")
		clk.Set(s + 10)
		n.Contains("x")
		clk.Set(s + 11)
		var b bytes.Buffer
		if _, err := n.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		n2, _ := a100Novelty(t, s+11)
		if _, err := n2.ReadFrom(&b); err != nil {
			t.Fatal(err)
		}
		if orig, got := n.Contains("a"), n2.Contains("a"); !orig || !got {
			t.Errorf("clock %d: a mark 2 ms old (T = 10 ms): the original Contains %v, the restored one (no downtime) %v; want true for both", s, orig, got)
		}
	}
}

// TestAudit100RotMeterEndOfTime: a Rate and a Novelty on a clock within
// a Period of MaxInt64 ms (the rotation deadline saturated) and jumping
// there from MinInt64 return, keep a mark made T/2 before MaxInt64 and
// forget one 3T before it, and a Rate counts its events.
func TestAudit100RotMeterEndOfTime(t *testing.T) {
	a100MeterChild(t, a100MeterEndOfTime)
}

func a100MeterEndOfTime(t *testing.T) {
	const T = 1000
	for _, s := range []int64{math.MaxInt64 - 3*T, math.MinInt64} {
		clk := sketchtest.NewFakeClock()
		clk.Set(s)
		n, err := meter.NewNovelty(T*time.Millisecond, meter.WithClock(clk), meter.WithSeed(2), meter.WithSize(2, 256))
		if err != nil {
			t.Fatal(err)
		}
		r, err := meter.NewRate(T*time.Millisecond, meter.WithClock(clk), meter.WithSeed(2), meter.WithSize(2, 256))
		if err != nil {
			t.Fatal(err)
		}
		if n.Seen("old") {
			t.Fatalf("start %d: a first Seen reported seen", s)
		}
		clk.Set(math.MaxInt64 - T/2)
		if n.Seen("new") {
			t.Fatalf("start %d: a first Seen at MaxInt64-T/2 reported seen", s)
		}
		for range 5 {
			r.Observe("k")
		}
		clk.Set(math.MaxInt64)
		if !n.Contains("new") || !n.Seen("new") {
			t.Fatalf("start %d: a mark T/2 old is not seen at MaxInt64", s)
		}
		if n.Contains("old") {
			t.Fatalf("start %d: a mark at least 3T old is still seen at MaxInt64", s)
		}
		// 5 events T/2 ago: 5 x exp(-1/2) per window.
		want := 5 * math.Exp(-0.5) / (T / 1000.0)
		if got := r.PerSecond("k"); got < want*0.999 || got > want*1.01 {
			t.Fatalf("start %d: PerSecond %v at MaxInt64, want about %v", s, got, want)
		}
	}
}
