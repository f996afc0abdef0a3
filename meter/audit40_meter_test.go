package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a40Clock() *sketchtest.FakeClock {
	c := sketchtest.NewFakeClock()
	c.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return c
}

// Rate never reads below the true decayed count, except the documented
// rotation term exp(-(N-1) x PeriodWindows) of the largest count the key
// ever held, through windows, period edges and promotions.
func TestAudit40RateNeverBelowTruth(t *testing.T) {
	for _, pw := range []float64{1, 2, 16} {
		for _, window := range []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second} {
			clk := a40Clock()
			r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(4, 4096), meter.WithPeriodWindows(pw), meter.WithSeed(7))
			if err != nil {
				t.Fatal(err)
			}
			lambda := 1 / window.Seconds()
			truth := map[string]float64{}
			peak := map[string]float64{}
			last := clk.Now()
			step := (window / 5).Truncate(time.Millisecond) // the clocks count whole ms
			if step < time.Millisecond {
				step = time.Millisecond
			}
			for i := 0; i < 600; i++ {
				// advance: mostly small, sometimes across a whole period
				d := step * time.Duration(1+i%4)
				if i%97 == 0 {
					d = time.Duration(float64(window)*pw).Truncate(time.Millisecond) + step
				}
				clk.Advance(d)
				now := clk.Now()
				f := math.Exp(-now.Sub(last).Seconds() * lambda)
				for k := range truth {
					truth[k] *= f
				}
				last = now
				k := fmt.Sprintf("k%d", i%5)
				n := float64(1 + i%3)
				r.ObserveAt(now, k, n)
				truth[k] += n
				peak[k] = math.Max(peak[k], truth[k])
				for kk, tv := range truth {
					got := r.PerSecondAt(now, kk) * window.Seconds()
					slack := math.Exp(-pw)*peak[kk] + 1e-6*tv + 1e-9
					if got < tv-slack {
						t.Fatalf("pw=%v window=%v step %d key %s: Rate count %v below the true decayed count %v (slack %v)", pw, window, i, kk, got, tv, slack)
					}
				}
			}
		}
	}
}

// Long idle beyond 2^31 ms within one generation's life: the decayed
// count is still right (not over-decayed, not below the truth).
func TestAudit40RateLongIdle(t *testing.T) {
	window := 100 * 24 * time.Hour
	clk := a40Clock()
	r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("k")
	for i := 0; i < 1000; i++ {
		r.ObserveAt(clk.Now(), "k", 1)
	}
	for _, idle := range []time.Duration{24 * time.Hour, 25 * 24 * time.Hour, 30 * 24 * time.Hour, 60 * 24 * time.Hour} {
		c2 := a40Clock()
		r2, _ := meter.NewRate(window, meter.WithClock(c2), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
		r2.ObserveAt(c2.Now(), "k", 1001)
		c2.Advance(idle)
		got := r2.PerSecond("k") * window.Seconds()
		want := 1001 * math.Exp(-idle.Seconds()/window.Seconds())
		if got < want*(1-1e-6) || got > want*(1+1e-3) {
			t.Errorf("idle %v: count %v, want %v", idle, got, want)
		}
	}
	// a 1 s window after 30 days idle reads ~0 (everything forgotten)
	c3 := a40Clock()
	r3, _ := meter.NewRate(time.Second, meter.WithClock(c3), meter.WithSize(2, 64))
	r3.ObserveAt(c3.Now(), "k", 1e6)
	c3.Advance(30 * 24 * time.Hour)
	if got := r3.PerSecond("k"); got != 0 && got > 1e-30 {
		t.Errorf("after 30 days idle: %v/s", got)
	}
	r3.Observe("k")
	if got := r3.PerSecond("k"); got < 1 || got > 1.001 {
		t.Errorf("one event after long idle: %v/s, want 1", got)
	}
}

// A clock stepping back never lowers a reading below what it was, nor
// makes it negative or NaN.
func TestAudit40RateClockBack(t *testing.T) {
	clk := a40Clock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
	for i := 0; i < 100; i++ {
		r.Observe("k")
	}
	clk.Advance(3 * time.Second)
	before := r.PerSecond("k")
	clk.Advance(-10 * time.Second)
	after := r.PerSecond("k")
	if after < before*(1-1e-6) || math.IsNaN(after) {
		t.Fatalf("clock back 10s: %v, before %v", after, before)
	}
	r.Observe("k")
	if got := r.PerSecond("k"); got < before+1 || math.IsNaN(got) {
		t.Fatalf("observe after step back: %v, want >= %v", got, before+1)
	}
	clk.Advance(20 * time.Second)
	if got := r.PerSecond("k"); !(got >= 0) {
		t.Fatalf("negative or NaN %v", got)
	}
}

func a40IsTyped(err error) bool {
	return errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)
}

// Hostile bytes: every single-byte flip and every truncation of a Rate
// and a Novelty snapshot fails with a typed error and leaves the meter as
// it was.
func TestAudit40PersistHostile(t *testing.T) {
	for _, kind := range []string{"rate", "novelty"} {
		clk := a40Clock()
		mk := func() (read func(string) float64, wt func(*bytes.Buffer) error, rf func(*bytes.Reader) (int64, error), obs func(string)) {
			if kind == "rate" {
				r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
				return func(k string) float64 { return r.PerSecond(k) }, func(b *bytes.Buffer) error { _, e := r.WriteTo(b); return e },
					func(b *bytes.Reader) (int64, error) { return r.ReadFrom(b) }, r.Observe
			}
			n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
			return func(k string) float64 {
					if n.Contains(k) {
						return 1
					}
					return 0
				}, func(b *bytes.Buffer) error { _, e := n.WriteTo(b); return e },
				func(b *bytes.Reader) (int64, error) { return n.ReadFrom(b) }, func(k string) { n.Seen(k) }
		}
		_, wt, _, obs := mk()
		for i := 0; i < 20; i++ {
			obs(fmt.Sprintf("s%d", i))
		}
		var buf bytes.Buffer
		if err := wt(&buf); err != nil {
			t.Fatal(err)
		}
		snap := buf.Bytes()
		read, _, rf, obs2 := mk()
		for i := 0; i < 5; i++ {
			obs2(fmt.Sprintf("d%d", i))
		}
		state := func() []float64 {
			var v []float64
			for i := 0; i < 5; i++ {
				v = append(v, read(fmt.Sprintf("d%d", i)))
			}
			for i := 0; i < 20; i++ {
				v = append(v, read(fmt.Sprintf("s%d", i)))
			}
			return v
		}
		want := state()
		check := func(what string, data []byte) {
			_, err := rf(bytes.NewReader(data))
			if err == nil {
				// a flip the format does not notice is tolerable only if it round trips to a valid state
				t.Errorf("%s %s: ReadFrom accepted damaged bytes", kind, what)
				return
			}
			if !a40IsTyped(err) {
				t.Errorf("%s %s: untyped error %v", kind, what, err)
			}
			if got := state(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: meter changed after a failed ReadFrom: %v, was %v", kind, what, got, want)
			}
		}
		for i := range snap {
			d := append([]byte(nil), snap...)
			d[i] ^= 0x5a
			check(fmt.Sprintf("flip byte %d", i), d)
		}
		for n := 0; n < len(snap); n++ {
			check(fmt.Sprintf("truncated to %d", n), snap[:n])
		}
	}
}

// Persist round trip: the restored Rate reads what the never-stopped one
// does, downtime counted.
func TestAudit40PersistRoundTrip(t *testing.T) {
	clk := a40Clock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(3, 256))
	for i := 0; i < 50; i++ {
		r.ObserveAt(clk.Now(), fmt.Sprint(i%7), float64(i))
		clk.Advance(37 * time.Millisecond)
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1500 * time.Millisecond)
	c2 := sketchtest.NewFakeClock()
	c2.SetTime(clk.Now())
	r2, _ := meter.NewRate(time.Second, meter.WithClock(c2), meter.WithSize(3, 256))
	if n, err := r2.ReadFrom(&buf); err != nil || n != r2.SnapshotSize() {
		t.Fatalf("ReadFrom: %d %v", n, err)
	}
	for i := 0; i < 7; i++ {
		a, b := r.PerSecond(fmt.Sprint(i)), r2.PerSecond(fmt.Sprint(i))
		if math.Abs(a-b) > 1e-5*math.Max(a, 1) {
			t.Errorf("key %d: restored %v, never-stopped %v", i, b, a)
		}
	}
}

// Inflight conserves under concurrency: mixed Acquire / TryAcquire /
// double Release on a tiny (colliding) sketch end at exactly 0, and no
// TryAcquire ever has more than max granted concurrently.
func TestAudit40InflightConserved(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(64, meter.WithSize(2, 3))
		if err != nil {
			t.Fatal(err)
		}
		const max = 5
		var live [8]atomic.Int64
		var wg sync.WaitGroup
		var over atomic.Int64
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 3000; i++ {
					k := i % 8
					key := fmt.Sprintf("key-%d", k)
					var g *meter.Guard
					if (i+w)%3 == 0 {
						g = in.Acquire(key)
						live[k].Add(1)
					} else {
						g = in.TryAcquire(key, max)
						if g != nil {
							live[k].Add(1)
						}
					}
					if g != nil {
						if c := in.Count(key); int64(c) < 1 {
							over.Add(1)
						}
						live[k].Add(-1)
						g.Release()
						g.Release()
					} else {
						g.Release() // nil guard
					}
					if i%50 == 0 {
						runtime.Gosched()
					}
				}
			}(w)
		}
		wg.Wait()
		if over.Load() != 0 {
			t.Errorf("%d times Count below 1 while holding a guard", over.Load())
		}
		for k := 0; k < 8; k++ {
			if c := in.Count(fmt.Sprintf("key-%d", k)); c != 0 {
				t.Errorf("key-%d: Count %d after every guard released, want 0", k, c)
			}
		}
		var zero meter.Guard
		zero.Release()
	})
}

// TryAcquire exact under contention: exactly max guards from racers.
func TestAudit40InflightTryAcquireExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, _ := meter.NewInflight(0, meter.WithSize(2, 4))
		in.Acquire("other") // a collider
		var got atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					if in.TryAcquire("k", 100) != nil {
						got.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if g := got.Load(); g > 100 {
			t.Fatalf("TryAcquire(k,100) granted %d", g)
		}
		if c := in.Count("k"); c != int(got.Load()) && c < int(got.Load()) {
			t.Fatalf("Count %d below granted %d", c, got.Load())
		}
	})
}

// Novelty: of racers on a new key, exactly one is told new, including
// when their time is exactly the rotation deadline (the racers promote).
func TestAudit40NoveltyRaceAtDeadline(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := 0; round < 20; round++ {
			clk := a40Clock()
			T := 10 * time.Millisecond
			n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithPeriodWindows(1), meter.WithSize(3, 1024))
			n.Seen("old") // marked
			clk.Advance(T - 3*time.Millisecond)
			n.Seen("old2")
			clk.Advance(4 * time.Millisecond) // 1 ms past the deadline (Period = T): the racers promote
			var news, olds, olds2 atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if !n.Seen("fresh") {
						news.Add(1)
					}
					if !n.Seen("old2") {
						olds2.Add(1)
					}
					if !n.Seen("old") {
						olds.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			if news.Load() != 1 {
				t.Fatalf("round %d: %d racers told a new key is new, want exactly 1", round, news.Load())
			}
			if olds2.Load() != 0 {
				t.Fatalf("round %d: key seen 4 ms ago (T=10ms) told new %d times", round, olds2.Load())
			}
			if olds.Load() != 1 {
				t.Fatalf("round %d: key seen T+1ms ago told new %d times, want 1", round, olds.Load())
			}
		}
	})
}

// Novelty has no false negatives across rotations: a key marked at m is
// seen at every time < m + T, for every offset relative to the deadline
// grid, with the minimal Period (= T).
func TestAudit40NoveltyNoFalseNegativeAcrossRotations(t *testing.T) {
	T := 8 * time.Millisecond
	for _, pw := range []float64{1, 1.5, 2} {
		for markOff := 0; markOff < 30; markOff++ {
			for lag := 0; lag < int(T/time.Millisecond); lag++ {
				clk := a40Clock()
				n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithPeriodWindows(pw), meter.WithSize(3, 256))
				clk.Advance(time.Duration(markOff) * time.Millisecond)
				if n.Seen("k") {
					t.Fatalf("fresh key seen")
				}
				clk.Advance(time.Duration(lag) * time.Millisecond)
				if !n.Contains("k") {
					t.Fatalf("pw=%v: key marked at +%dms not Contained %dms later (T=%v)", pw, markOff, lag, T)
				}
			}
		}
	}
}

// Concurrent Seen/Contains with a clock moving through promotions: a
// key just Seen is Contained while less than T has passed.
func TestAudit40NoveltyConcurrentRotations(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := a40Clock()
		T := 20 * time.Millisecond
		n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithPeriodWindows(1), meter.WithSize(3, 1<<14))
		stop := make(chan struct{})
		var drv sync.WaitGroup
		drv.Add(1)
		go func() {
			defer drv.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		}()
		var bad atomic.Int64
		var msg atomic.Value
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 3000; i++ {
					k := fmt.Sprintf("w%d-%d", w, i%40)
					m := clk.NowMillis()
					n.Seen(k)
					ok := n.Contains(k)
					q := clk.NowMillis()
					if !ok && q < m+T.Milliseconds() {
						bad.Add(1)
						msg.Store(fmt.Sprintf("key %s Seen at >= %d not Contained by %d", k, m, q))
					}
				}
			}(w)
		}
		wg.Wait()
		close(stop)
		drv.Wait()
		if bad.Load() != 0 {
			t.Fatalf("%d false negatives, e.g. %v", bad.Load(), msg.Load())
		}
	})
}
