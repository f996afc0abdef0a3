package meter_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a40Day = 24 * time.Hour

// Novelty over windows longer than 2^31 ms: a key marked is seen all
// through T, across the stamp horizon and a lazy promotion after a long
// idle, and forgotten after.
func TestAudit40NoveltyLongIdle(t *testing.T) {
	T := 60 * a40Day
	for _, pw := range []float64{1, 2} {
		for _, c := range []struct {
			mark, check time.Duration
		}{
			{0, 59 * a40Day}, {a40Day, 60*a40Day + 12*time.Hour}, {10 * a40Day, 69 * a40Day},
			{59 * a40Day, 118 * a40Day}, {0, 30 * a40Day}, {a40Day, 25 * a40Day},
		} {
			clk := a40Clock()
			n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(3, 128), meter.WithPeriodWindows(pw))
			clk.Advance(c.mark)
			n.Seen("k")
			clk.Advance(c.check - c.mark)
			if !n.Contains("k") {
				t.Errorf("pw=%v: key marked at day %v not Contained at day %v (T = 60 days)", pw, c.mark.Hours()/24, c.check.Hours()/24)
			}
			clk.Advance(T - (c.check - c.mark) + time.Hour)
			if n.Contains("k") {
				t.Errorf("pw=%v: key marked at day %v still Contained T+1h later", pw, c.mark.Hours()/24)
			}
		}
	}
}

// Rate over a 60-day window read across a lazy promotion after a long
// idle (PeriodWindows 1, 2 generations): never below the truth beyond the
// rotation term.
func TestAudit40RateLongIdleAcrossPromotion(t *testing.T) {
	w := 60 * a40Day
	for _, idle := range []time.Duration{25 * a40Day, 59 * a40Day, 61 * a40Day, 90 * a40Day, 119 * a40Day} {
		clk := a40Clock()
		r, _ := meter.NewRate(w, meter.WithClock(clk), meter.WithSize(3, 128), meter.WithPeriodWindows(1))
		clk.Advance(a40Day)
		r.ObserveAt(clk.Now(), "k", 1000)
		clk.Advance(idle)
		got := r.PerSecond("k") * w.Seconds()
		truth := 1000 * math.Exp(-idle.Seconds()/w.Seconds())
		// the primary after the promotion at day 60 was built at day 0, so
		// holds the event; after day 120 both generations that saw it are
		// retired: the rotation term, exp(-(N-1) x PeriodWindows) of the peak
		if got < truth*(1-1e-9)-math.Exp(-1)*1000 || got > truth*(1+1e-3) {
			t.Errorf("idle %v days: count %v, truth %v", idle.Hours()/24, got, truth)
		}
	}
}

// WriteTo under traffic with promotions (-race), and the snapshot
// restores to a meter whose every key reads at least its count minus the
// events in flight.
func TestAudit40SnapshotUnderTraffic(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := a40Clock()
		r, _ := meter.NewRate(10*time.Millisecond, meter.WithClock(clk), meter.WithSize(2, 256), meter.WithPeriodWindows(1))
		n, _ := meter.NewNovelty(10*time.Millisecond, meter.WithClock(clk), meter.WithSize(2, 256), meter.WithPeriodWindows(1))
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := fmt.Sprint(i % 20)
					r.Observe(k)
					n.Seen(k)
					if w == 0 && i%50 == 0 {
						clk.Advance(time.Millisecond)
					}
				}
			}(w)
		}
		for i := 0; i < 30; i++ {
			var b1, b2 bytes.Buffer
			a40Save(t, r, &b1)
			a40Save(t, n, &b2)
			c2 := sketchtest.NewFakeClock()
			c2.SetTime(clk.Now())
			r2, _ := meter.NewRate(10*time.Millisecond, meter.WithClock(c2), meter.WithSize(2, 256), meter.WithPeriodWindows(1))
			n2, _ := meter.NewNovelty(10*time.Millisecond, meter.WithClock(c2), meter.WithSize(2, 256), meter.WithPeriodWindows(1))
			if _, err := r2.ReadFrom(&b1); err != nil {
				t.Fatalf("restore %d: %v", i, err)
			}
			if _, err := n2.ReadFrom(&b2); err != nil {
				t.Fatalf("restore %d: %v", i, err)
			}
			if v := r2.PerSecond("3"); math.IsNaN(v) || v < 0 {
				t.Fatalf("restored rate %v", v)
			}
		}
		close(stop)
		wg.Wait()
	})
}

// a40Save writes w's snapshot into b, taking it again while a promotion
// under the traffic makes WriteTo refuse (the documented "take the
// snapshot again").
func a40Save(t *testing.T, w io.WriterTo, b *bytes.Buffer) {
	t.Helper()
	for try := 0; ; try++ {
		b.Reset()
		_, err := w.WriteTo(b)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "take the snapshot again") || try >= 10000 {
			t.Fatalf("WriteTo (try %d): %v", try, err)
		}
	}
}
