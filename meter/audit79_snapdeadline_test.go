package meter_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79NoveltySnapshotAcrossDeadline: snapshots taken at every ms
// offset of a Period (PeriodWindows 1, so Period = T, the tightest case)
// and restored with a downtime that carries the restored rotator past
// its deadline: every key marked less than T before the restoring time
// (downtime counted) is still seen. novelty.go: ReadFrom "A key marked
// within T of the snapshot's instant is seen until T after its mark, the
// downtime counted", and "rotation adds no false negative".
func TestAudit79NoveltySnapshotAcrossDeadline(t *testing.T) {
	testsize.Serial(t)
	T := 20 * time.Millisecond
	tm := T.Milliseconds()
	for off := int64(0); off < 2*tm; off++ {
		for _, gap := range []int64{0, 1, tm / 2, tm - 1, tm + 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(50_000)
			n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(8), meter.WithSize(4, 2048), meter.WithPeriodWindows(1))
			// a mark every ms for 3 T, then the snapshot off ms later
			start := clk.NowMillis()
			for i := int64(0); i < 3*tm+off; i++ {
				clk.Set(start + i)
				n.Seen(fmt.Sprint("m", i))
			}
			snapAt := start + 3*tm + off
			clk.Set(snapAt)
			var buf bytes.Buffer
			if _, err := n.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			clk2 := sketchtest.NewFakeClock()
			clk2.Set(snapAt + gap)
			n2, _ := meter.NewNovelty(T, meter.WithClock(clk2), meter.WithSeed(1), meter.WithSize(4, 2048), meter.WithPeriodWindows(1))
			if _, err := n2.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			for i := int64(0); i < 3*tm+off; i++ {
				age := snapAt + gap - (start + i)
				if age < tm && !n2.Contains(fmt.Sprint("m", i)) {
					t.Fatalf("off %d gap %d: key marked %d ms before the restoring time (< T=%d) not contained", off, gap, age, tm)
				}
			}
		}
	}
}

// TestAudit79RateSnapshotAcrossDeadline: the Rate analogue: restored past
// its deadline, the estimate is at least the events of the last Period,
// decayed over the downtime.
func TestAudit79RateSnapshotAcrossDeadline(t *testing.T) {
	window := 5 * time.Millisecond
	period := int64(5) // PeriodWindows 1
	for off := int64(0); off < 2*period; off++ {
		for _, gap := range []int64{0, 1, 3, 4, 6} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			r, _ := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(8), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
			var log []audit79Event
			start := clk.NowMillis()
			for i := int64(0); i < 4*period+off; i++ {
				clk.Set(start + i)
				r.Observe("k")
				log = append(log, audit79Event{start + i, 1})
			}
			snapAt := start + 4*period + off
			clk.Set(snapAt)
			var buf bytes.Buffer
			if _, err := r.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			clk2 := sketchtest.NewFakeClock()
			clk2.Set(snapAt + gap)
			r2, _ := meter.NewRate(window, meter.WithClock(clk2), meter.WithSeed(2), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
			if _, err := r2.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			now := snapAt + gap
			all, recent := audit79Truth(log, now, window, period)
			got := r2.PerSecond("k") * window.Seconds()
			if got < recent*(1-1e-9) || got > all*(1+1e-4) {
				t.Fatalf("off %d gap %d: restored count %v, want in [%v (last Period), %v (all)]", off, gap, got, recent, all)
			}
		}
	}
}
