package meter_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit118RotNoveltyRestoreAcrossDeadlines (regression, passes):
// Novelty.ReadFrom: "A key marked within T of the snapshot's instant is
// seen until T after its mark, the downtime counted", and Novelty's
// "rotation adds no false negative". With Period = T (PeriodWindows 1)
// and 2T, a key is marked at every offset before a rotation deadline,
// the snapshot is taken s ms later (the live meter may promote first),
// and restored into a fresh Novelty on another clock after a downtime
// dt (the deadline passing during it: the first access promotes, one
// Period or several). Wherever the mark is less than T old at the read
// (s + dt < T), the restored meter must say seen, and must keep saying
// so up to T after the mark as the clock steps on (promotions included).
func TestAudit118RotNoveltyRestoreAcrossDeadlines(t *testing.T) {
	const T = 6 * time.Millisecond
	const tms = int64(T / time.Millisecond)
	for _, pw := range []float64{1, 2} {
		mk := func(clk *sketchtest.FakeClock) *meter.Novelty {
			n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(2, 256), meter.WithSeed(7), meter.WithPeriodWindows(pw))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		period := int64(float64(tms) * pw)
		for o := range period {
			for s := range tms {
				for dt := int64(0); s+dt < tms; dt++ {
					clk := sketchtest.NewFakeClock()
					clk.Set(10_000) // the first deadline is 10_000 + period
					n := mk(clk)
					mark := 10_000 + period - 1 - o
					clk.Set(mark)
					if n.Seen("k") {
						t.Fatal("k seen before its first sighting")
					}
					clk.Set(mark + s)
					var buf bytes.Buffer
					if _, err := n.WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					clk2 := sketchtest.NewFakeClock()
					clk2.Set(mark + s + dt)
					m := mk(clk2)
					if _, err := m.ReadFrom(&buf); err != nil {
						t.Fatal(err)
					}
					for age := s + dt; age < tms; age++ {
						clk2.Set(mark + age)
						if !m.Contains("k") {
							t.Fatalf("PeriodWindows %v: mark %d ms before a deadline, snapshot %d ms after the mark, downtime %d ms: not seen %d ms after its mark (T = %v)", pw, o+1, s, dt, age, T)
						}
					}
				}
			}
		}
	}
}
