package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Strict one-sidedness: with no collisions possible to matter and the
// default Period (rotation term 1e-7 of the peak), the estimate is never
// below the truth by more than float64 noise (1e-12 relative).
func TestAudit40RateStrictRounding(t *testing.T) {
	for _, window := range []time.Duration{3 * time.Millisecond, 250 * time.Millisecond, time.Minute} {
		clk := a40Clock()
		r, _ := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(2, 1<<12), meter.WithSeed(1))
		lambda := 1 / window.Seconds()
		var truth, peak float64
		for i := 0; i < 3000; i++ {
			d := time.Duration(1+(i*7919)%13) * time.Millisecond
			clk.Advance(d)
			truth *= math.Exp(-d.Seconds() * lambda)
			n := float64(1 + (i*31)%17)
			if i%5 != 0 {
				r.ObserveAt(clk.Now(), "k", n)
				truth += n
			}
			peak = math.Max(peak, truth)
			got := r.PerSecond("k") * window.Seconds()
			if got < truth*(1-1e-12)-math.Exp(-16)*peak {
				t.Fatalf("window %v step %d: count %v below the truth %v by %g", window, i, got, truth, truth-got)
			}
		}
	}
}

// A restore under a clock behind the snapshot's instant decays nothing
// ("none if the restoring clock's time is earlier"), and under a clock
// ahead by several Periods reads what the never-stopped meter reads.
func TestAudit40PersistClockBehindAndAhead(t *testing.T) {
	clk := a40Clock()
	mk := func(c *sketchtest.FakeClock) *meter.Rate {
		r, err := meter.NewRate(time.Second, meter.WithClock(c), meter.WithSize(3, 256), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := mk(clk)
	for i := 0; i < 40; i++ {
		r.ObserveAt(clk.Now(), fmt.Sprint(i%4), 10)
		clk.Advance(83 * time.Millisecond)
	}
	var buf bytes.Buffer
	r.WriteTo(&buf)
	snap := buf.Bytes()
	at := map[string]float64{}
	for i := 0; i < 4; i++ {
		at[fmt.Sprint(i)] = r.PerSecond(fmt.Sprint(i))
	}
	// behind
	cb := sketchtest.NewFakeClock()
	cb.SetTime(clk.Now().Add(-time.Hour))
	rb := mk(cb)
	if _, err := rb.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	for k, v := range at {
		if got := rb.PerSecond(k); math.Abs(got-v) > 1e-6*v {
			t.Errorf("restore behind: key %s reads %v, at the snapshot %v", k, got, v)
		}
	}
	// ahead by 2.6 periods: compare with the never-stopped meter
	for _, down := range []time.Duration{400 * time.Millisecond, 2600 * time.Millisecond, 5 * time.Second} {
		ca := sketchtest.NewFakeClock()
		ca.SetTime(clk.Now().Add(down))
		ra := mk(ca)
		if _, err := ra.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		c2 := sketchtest.NewFakeClock()
		c2.SetTime(clk.Now())
		r2 := mk(c2)
		r2.ReadFrom(bytes.NewReader(snap))
		c2.Advance(down)
		for k := range at {
			a, b := ra.PerSecond(k), r2.PerSecond(k)
			truthLike := at[k] * math.Exp(-down.Seconds())
			if math.Abs(a-b) > 1e-6*math.Max(b, 1e-3) {
				t.Errorf("down %v key %s: restored-late %v, restored-then-advanced %v (decayed %v)", down, k, a, b, truthLike)
			}
		}
	}
}

// Another configuration is a typed mismatch and leaves the meter as it was.
func TestAudit40PersistMismatch(t *testing.T) {
	clk := a40Clock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 32))
	r.Observe("a")
	var buf bytes.Buffer
	r.WriteTo(&buf)
	snap := buf.Bytes()
	type target struct {
		name string
		rf   func([]byte) error
		read func() float64
	}
	var ts []target
	for _, o := range []struct {
		name string
		w    time.Duration
		opts []meter.Option
	}{
		{"window", 2 * time.Second, []meter.Option{meter.WithSize(2, 32)}},
		{"periods", time.Second, []meter.Option{meter.WithSize(2, 32), meter.WithPeriodWindows(8)}},
		{"cells", time.Second, []meter.Option{meter.WithSize(2, 64)}},
		{"levels", time.Second, []meter.Option{meter.WithSize(3, 32)}},
		{"hasher", time.Second, []meter.Option{meter.WithSize(2, 32), meter.WithHasher(sketch.XXH3())}},
	} {
		rr, err := meter.NewRate(o.w, append(o.opts, meter.WithClock(clk))...)
		if err != nil {
			t.Fatal(err)
		}
		rr.Observe("b")
		ts = append(ts, target{o.name, func(b []byte) error { _, e := rr.ReadFrom(bytes.NewReader(b)); return e }, func() float64 { return rr.PerSecond("b") + rr.PerSecond("a") }})
	}
	nv, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 32))
	nv.Seen("b")
	ts = append(ts, target{"novelty", func(b []byte) error { _, e := nv.ReadFrom(bytes.NewReader(b)); return e }, func() float64 {
		if nv.Contains("b") && !nv.Contains("a") {
			return 1
		}
		return 0
	}})
	for _, tg := range ts {
		before := tg.read()
		err := tg.rf(snap)
		if err == nil || !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: %v, want ErrSnapshotMismatch", tg.name, err)
		}
		if after := tg.read(); after != before {
			t.Errorf("%s: meter changed %v -> %v", tg.name, before, after)
		}
	}
}

// A Novelty restored reads a key marked within T of the snapshot as seen
// until T after its mark, the downtime counted, and new after.
func TestAudit40NoveltyRestore(t *testing.T) {
	T := 100 * time.Millisecond
	for _, pw := range []float64{1, 16} {
		for _, down := range []time.Duration{0, 30 * time.Millisecond, 59 * time.Millisecond, 61 * time.Millisecond, 500 * time.Millisecond} {
			clk := a40Clock()
			n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(3, 256), meter.WithPeriodWindows(pw))
			clk.Advance(70 * time.Millisecond)
			n.Seen("k") // marked at 70
			clk.Advance(40 * time.Millisecond)
			var buf bytes.Buffer
			n.WriteTo(&buf) // at 110: k is 40ms old
			c2 := sketchtest.NewFakeClock()
			c2.SetTime(clk.Now().Add(down))
			n2, _ := meter.NewNovelty(T, meter.WithClock(c2), meter.WithSize(3, 256), meter.WithPeriodWindows(pw))
			if _, err := n2.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			age := 40*time.Millisecond + down
			got := n2.Contains("k")
			if age < T && !got {
				t.Errorf("pw=%v down %v: key %v old not Contained (false negative)", pw, down, age)
			}
			if age > T+time.Millisecond && got {
				t.Errorf("pw=%v down %v: key %v old still Contained", pw, down, age)
			}
		}
	}
}

// Concurrent Release of one Guard takes exactly one back.
func TestAudit40GuardReleaseOnce(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, _ := meter.NewInflight(10, meter.WithSize(2, 64))
		g1 := in.Acquire("k")
		g2 := in.TryAcquire("k", 10)
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); g1.Release() }()
		}
		wg.Wait()
		if c := in.Count("k"); c != 1 {
			t.Fatalf("Count %d after one of two guards released 16 times, want 1", c)
		}
		g2.Release()
		if c := in.Count("k"); c != 0 {
			t.Fatalf("Count %d, want 0", c)
		}
	})
}

// Racers on fresh keys while the clock crosses deadlines: each key is told
// new exactly once (its marks are far younger than T).
func TestAudit40NoveltyRaceMovingClock(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := a40Clock()
		T := 50 * time.Millisecond
		n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithPeriodWindows(1), meter.WithSize(3, 1<<14))
		for round := 0; round < 60; round++ {
			key := fmt.Sprint("fresh-", round)
			var news atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < 6; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					<-start
					for i := 0; i < 4; i++ {
						if w == 0 && i == 1 {
							clk.Advance(time.Millisecond)
						}
						if !n.Seen(key) {
							news.Add(1)
						}
					}
				}(w)
			}
			close(start)
			wg.Wait()
			if news.Load() != 1 {
				t.Fatalf("round %d (clock %d): key told new %d times, want exactly 1; stats deadline crossing", round, clk.NowMillis(), news.Load())
			}
		}
	})
}

// After a restore the meter promotes and builds generations as the
// never-stopped one does (the adopted seed): both read the same after more
// periods of identical traffic.
func TestAudit40RestoredTracksNeverStopped(t *testing.T) {
	clk := a40Clock()
	mk := func(c *sketchtest.FakeClock) *meter.Novelty {
		n, _ := meter.NewNovelty(10*time.Millisecond, meter.WithClock(c), meter.WithSize(2, 8), meter.WithPeriodWindows(1))
		return n
	}
	a := mk(clk)
	for i := 0; i < 30; i++ {
		a.Seen(fmt.Sprint(i))
		clk.Advance(time.Millisecond)
	}
	var buf bytes.Buffer
	a.WriteTo(&buf)
	c2 := sketchtest.NewFakeClock()
	c2.SetTime(clk.Now())
	b := mk(c2)
	if _, err := b.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		k := fmt.Sprint((i * 7) % 53)
		if x, y := a.Seen(k), b.Seen(k); x != y {
			t.Fatalf("step %d key %s: never-stopped %v, restored %v", i, k, x, y)
		}
		clk.Advance(time.Millisecond)
		c2.Advance(time.Millisecond)
	}
}
