package meter_test

// Audit 113 (snapshots): regression, passes. A Novelty with T of 40 days
// or 146 years (PeriodWindows 1, 1.5, 16) marks a key, idles 26 or 30
// days (past 2^31 ms: a re-base), is saved, and restored after a
// downtime of 0, 9 or 25 days into a fresh Novelty with another seed on
// the same clock: the restored one answers Contains as the never-stopped
// one does, at the restore, at T-1ms and at T+2ms after the mark.
// Contract: Novelty.ReadFrom ("A key marked within T of the snapshot's
// instant is seen until T after its mark, the downtime counted"),
// meter/doc.go ("a restored meter reads what the never-stopped one
// would").

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit113SnapNoveltyLongIdleRestore(t *testing.T) {
	day := 24 * time.Hour
	for _, T := range []time.Duration{40 * day, 146 * 365 * day} {
		for _, k := range []float64{1, 1.5, 16} {
			if float64(T)*k > float64(1<<62) {
				continue
			}
			for _, idle := range []time.Duration{26 * day, 30 * day} {
				for _, down := range []time.Duration{0, 9 * day, 25 * day} {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 64), meter.WithPeriodWindows(k))
					if err != nil {
						t.Fatal(err)
					}
					n.Seen("a")
					mark := clk.Now()
					clk.Advance(idle)
					n.Contains("zz")
					var buf bytes.Buffer
					if _, err := n.WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					clk.Advance(down)
					n2, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(7), meter.WithSize(2, 64), meter.WithPeriodWindows(k))
					if _, err := n2.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
						t.Fatal(err)
					}
					age := clk.Now().Sub(mark)
					want := age <= T
					if g := n2.Contains("a"); g != want || n.Contains("a") != g {
						t.Errorf("T %v k %v idle %v down %v: restored %v orig %v want %v", T, k, idle, down, g, n.Contains("a"), want)
					}
					if age < T {
						clk.Set(mark.Add(T - time.Millisecond).UnixMilli())
						if !n2.Contains("a") || !n.Contains("a") {
							t.Errorf("T %v k %v idle %v down %v: at T-1ms restored %v orig %v", T, k, idle, down, n2.Contains("a"), n.Contains("a"))
						}
						clk.Set(mark.Add(T + 2*time.Millisecond).UnixMilli())
						if n2.Contains("a") != n.Contains("a") {
							t.Errorf("T %v k %v idle %v down %v: at T+2ms restored %v orig %v", T, k, idle, down, n2.Contains("a"), n.Contains("a"))
						}
					}
				}
			}
		}
	}
}
