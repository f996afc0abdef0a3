package meter_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit58FixedNoveltyRestoreBehindClockFalseNegative: a Novelty
// (T = 100 ms, PeriodWindows 1, deadline at +100 ms) marks k at +50 ms
// and is saved at +50 ms by an encode that takes 20 ms (the clock reads
// +70 when the second generation is encoded; no write, no promotion, so
// WriteTo succeeds). It is restored on a clock one hour behind the
// snapshot's (a host with a skewed clock; "none if the restoring clock's
// time is earlier"). The restored deadline comes 50 ms after the
// restore; from then the second generation is the primary, and it says
// k unseen from 80 ms after the restore, 80 ms after the mark: each
// generation is un-aged at its own snapshot instant, so the second one
// carries the 20 ms of the encode as extra age. The never-stopped
// Novelty sees k until +150.
// meter/persist.go (Novelty.ReadFrom): "A key marked within T of the
// snapshot's instant is seen until T after its mark, the downtime
// counted"; meter/novelty.go: "no false negatives within T".
func TestAudit58FixedNoveltyRestoreBehindClockFalseNegative(t *testing.T) {
	const t0 = 1_700_000_000_000
	// behind: how far the restoring clock is behind the snapshot's
	// instant; -10 is 10 ms after it, within the encode.
	for _, behind := range []int64{1, 3_600_000, 0, -10} {
		c := sketchtest.NewFakeClock()
		c.Set(t0)
		mk := func(c *sketchtest.FakeClock) *meter.Novelty {
			n, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(4, 64<<10), meter.WithPeriodWindows(1), meter.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		n := mk(c)
		c.Set(t0 + 50)
		n.Seen("k")
		var buf bytes.Buffer
		if _, err := n.WriteTo(&a58Writer{w: &buf, n: 3, hook: func() { c.Set(t0 + 70) }}); err != nil {
			t.Fatalf("WriteTo: %v", err)
		}
		// the live one, for reference
		c.Set(t0 + 50 + 95)
		live := n.Contains("k")
		c2 := sketchtest.NewFakeClock()
		r0 := t0 + 50 - behind // the restoring clock is behind the snapshot's instant
		c2.Set(r0)
		m := mk(c2)
		if _, err := m.ReadFrom(&buf); err != nil {
			t.Fatalf("ReadFrom: %v", err)
		}
		for d := int64(0); d+max(0, -behind) <= 95; d++ {
			c2.Set(r0 + d)
			if !m.Contains("k") {
				t.Errorf("restored on a clock %d ms behind the snapshot: k (marked at the snapshot's instant, T = 100 ms) unseen %d ms after the restore, %d ms after the mark (downtime counted) "+
					"(the live Novelty sees it 95 ms after the mark: %v). Novelty.ReadFrom: \"A key marked within T of the snapshot's instant is seen until T after its mark, the downtime counted\"",
					behind, d, d+max(0, -behind), live)
				break
			}
		}
	}
}

// TestAudit58FixedRateRestoreBehindClockBelowTruth: the same slow
// encode (20 ms between the two generations) for a Rate (window 100 ms,
// PeriodWindows 1): 1000 events at +50 ms, restored on a clock behind
// the snapshot's. Until the restored deadline it reads the snapshot's
// value; from the promotion (50 ms later) it reads the second
// generation, decayed by the 20 ms of the encode on top: exp(-0.2) =
// 0.82 of the truth, below what the never-stopped Rate reads 1 ms after
// its own promotion. meter/rate.go: "The sketch only errs upward ...
// never lower it, except the rotation term" (exp(-16) at the default,
// nothing here: the events are 51 ms old); meter/doc.go: "so a restored
// meter reads what the never-stopped one would".
func TestAudit58FixedRateRestoreBehindClockBelowTruth(t *testing.T) {
	const t0 = 1_700_000_000_000
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	mk := func(c *sketchtest.FakeClock) *meter.Rate {
		r, err := meter.NewRate(100*time.Millisecond, meter.WithSize(4, 64<<10), meter.WithPeriodWindows(1), meter.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := mk(c)
	c.Set(t0 + 50)
	r.ObserveAt(c.Now(), "k", 1000)
	var buf bytes.Buffer
	if _, err := r.WriteTo(&a58Writer{w: &buf, n: 3, hook: func() { c.Set(t0 + 70) }}); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	c.Set(t0 + 101) // the live Rate, just past its promotion
	live := r.PerSecond("k")
	truth := 1000 * math.Exp(-51.0/100) / 0.1
	c2 := sketchtest.NewFakeClock()
	r0 := int64(t0 + 50 - 3_600_000)
	c2.Set(r0)
	m := mk(c2)
	if _, err := m.ReadFrom(&buf); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	c2.Set(r0 + 51) // just past the restored deadline (50 ms after the restore)
	got := m.PerSecond("k")
	if got < truth*(1-1e-9) {
		t.Errorf("restored on a clock 1 h behind, 51 ms after the restore (just past its promotion): PerSecond = %v, below the truth %v (ratio %.4f; "+
			"the never-stopped Rate reads %v at the same point). rate.go: \"The sketch only errs upward\"; doc.go: \"a restored meter reads what the never-stopped one would\"",
			got, truth, got/truth, live)
	}
}

// TestAudit58NoveltyRestoreBehindClockInstantEncode: the control of the
// finding: an encode during which the clock does not move, restored on a
// clock behind, sees k for T after the restore, across the promotion.
func TestAudit58NoveltyRestoreBehindClockInstantEncode(t *testing.T) {
	const t0 = 1_700_000_000_000
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	mk := func(c *sketchtest.FakeClock) *meter.Novelty {
		n, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(4, 64<<10), meter.WithPeriodWindows(1), meter.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := mk(c)
	c.Set(t0 + 50)
	n.Seen("k")
	var buf bytes.Buffer
	if _, err := n.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	c2 := sketchtest.NewFakeClock()
	r0 := int64(t0 + 50 - 3_600_000)
	c2.Set(r0)
	m := mk(c2)
	if _, err := m.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for d := int64(0); d < 100; d++ {
		c2.Set(r0 + d)
		if !m.Contains("k") {
			t.Fatalf("k unseen %d ms after a restore on a clock 1 h behind (T = 100 ms)", d)
		}
	}
}
