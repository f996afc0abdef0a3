package meter_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Every key in one cell (WithSize(1, 1)): a key's count is the cell's,
// all the keys' acquisitions together. 30 unconditional Acquires of
// another key, then goroutines racing TryAcquire(k, 100): exactly 70
// guards at every GOMAXPROCS ("every decision is TryUpdate's limit,
// aggregate + 1 <= max"; "N goroutines racing TryAcquire(k, 100) without
// releasing get exactly 100 guards"). After every release the cell is 0.
func TestAudit88MeterInflightSharedCellExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(1000, meter.WithSize(1, 1), meter.WithSeed(88))
		if err != nil {
			t.Fatal(err)
		}
		var others []*meter.Guard
		for range 30 {
			others = append(others, in.Acquire("other"))
		}
		const N = 64
		guards := make(chan *meter.Guard, N*4)
		var wg sync.WaitGroup
		for range N {
			wg.Go(func() {
				for range 4 {
					if g := in.TryAcquire("k", 100); g != nil {
						guards <- g
					}
				}
			})
		}
		wg.Wait()
		close(guards)
		var got []*meter.Guard
		for g := range guards {
			got = append(got, g)
		}
		if len(got) != 70 {
			t.Errorf("TryAcquire(k, 100) with 30 others in the cell: %d guards; want exactly 70", len(got))
		}
		if c := in.Count("k"); c != 100 {
			t.Errorf("Count %d; want 100 (the shared cell)", c)
		}
		// Release concurrently, each guard twice.
		for _, g := range append(got, others...) {
			wg.Go(func() { g.Release(); g.Release() })
		}
		wg.Wait()
		if c := in.Count("k"); c != 0 {
			t.Errorf("after every release: Count %d; want 0", c)
		}
	})
}

// Random TryAcquire / Acquire / Release on colliding keys (WithSize(2,
// 3)) at every GOMAXPROCS: a key that only TryAcquires never holds more
// guards than its max at any moment (a collision can only refuse it
// early, "never admit it past max"), and at quiescence every Count is 0.
func TestAudit88MeterInflightMixedRace(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(64, meter.WithSize(2, 3), meter.WithSeed(7))
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c", "d", "e"}
		maxOf := []int{1, 3, 5, 8, 64}
		var held [5]atomic.Int64
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for gi := range 8 {
			wg.Go(func() {
				x := uint64(gi+1) * 0x9e3779b97f4a7c15
				var mine []*meter.Guard
				var mineKey []int
				for range 400 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					k := int(x % 5)
					switch {
					case x>>20%3 != 0 && k < 4:
						if g := in.TryAcquire(keys[k], maxOf[k]); g != nil {
							if h := held[k].Add(1); h > int64(maxOf[k]) {
								t.Errorf("key %s: %d guards held, max %d", keys[k], h, maxOf[k])
							}
							admitted.Add(1)
							mine = append(mine, g)
							mineKey = append(mineKey, k)
						}
					case k == 4:
						mine = append(mine, in.Acquire(keys[4]))
						mineKey = append(mineKey, 4)
					}
					if len(mine) > 0 && x>>30%2 == 0 {
						j := int(x>>33) % len(mine)
						if mineKey[j] < 4 {
							held[mineKey[j]].Add(-1)
						}
						mine[j].Release()
						mine[j] = mine[len(mine)-1]
						mineKey[j] = mineKey[len(mineKey)-1]
						mine, mineKey = mine[:len(mine)-1], mineKey[:len(mineKey)-1]
					}
				}
				for j, g := range mine {
					if mineKey[j] < 4 {
						held[mineKey[j]].Add(-1)
					}
					g.Release()
				}
			})
		}
		wg.Wait()
		if admitted.Load() == 0 {
			t.Fatal("no TryAcquire admitted")
		}
		for _, k := range keys {
			if c := in.Count(k); c != 0 {
				t.Errorf("at quiescence Count(%q) = %d; want 0", k, c)
			}
		}
	})
}

// Rate under concurrent ObserveAt at a frozen clock, every key in one
// cell: nothing decays within the millisecond and every count is an
// integer below 2^24, so each key reads exactly the total of all events
// (the cell's), at every GOMAXPROCS; never below its own.
func TestAudit88MeterRateConcurrentExactCell(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		r, err := meter.NewRate(2*time.Second, meter.WithSize(1, 1), meter.WithClock(clk), meter.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 200 {
					if i%2 == 0 {
						r.Observe("k" + string(rune('a'+g%4)))
					} else {
						r.ObserveAt(now, "k"+string(rune('a'+g%4)), 3)
					}
				}
			})
		}
		wg.Wait()
		want := 16 * (100 + 300) / 2.0 // per second: count / window
		for _, k := range []string{"ka", "kb", "kc", "kd", "never"} {
			if got := r.PerSecondAt(now, k); got != want {
				t.Errorf("PerSecond(%q) %v; want exactly %v (the shared cell)", k, got, want)
			}
		}
	})
}

// Novelty against an exact model: keys alone in their cells, random
// sub-millisecond times (nondecreasing), T whole or not, several
// PeriodWindows: SeenAt says seen iff the key was marked within T' (T
// rounded up to a whole ms) of whole clock milliseconds, and marks it
// either way; ContainsAt says the same and never marks.
func TestAudit88MeterNoveltyExactModel(t *testing.T) {
	for _, T := range []time.Duration{time.Millisecond, 2500 * time.Microsecond, 7 * time.Millisecond, 40 * time.Millisecond} {
		for _, pw := range []float64{1, 1.5, 16} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithPeriodWindows(pw), meter.WithSize(3, 2048), meter.WithSeed(5))
			if err != nil {
				t.Fatal(err)
			}
			tw := (T + time.Millisecond - 1) / time.Millisecond // T' in ms
			last := map[string]int64{}
			now := clk.Now()
			x := uint64(T) ^ math.Float64bits(pw)
			for i := range 2000 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				now = now.Add(time.Duration(x>>8%uint64(3*T/2)) + time.Duration(x>>40%1000)*time.Microsecond/7)
				clk.SetTime(now)
				k := string(rune('a' + x>>50%6))
				ms := now.UnixMilli()
				l, ok := last[k]
				want := ok && ms-l <= int64(tw)
				if x>>45%4 == 0 {
					if got := n.ContainsAt(now, k); got != want {
						t.Fatalf("T=%v pw=%v step %d: ContainsAt(%q) %v; want %v (last mark %d ms ago)", T, pw, i, k, got, want, ms-l)
					}
					continue
				}
				if got := n.SeenAt(now, k); got != want {
					t.Fatalf("T=%v pw=%v step %d: SeenAt(%q) %v; want %v (last mark %d ms ago, T' %d ms)", T, pw, i, k, got, want, ms-l, tw)
				}
				last[k] = ms
			}
		}
	}
}

// The documented panics and errors on bad input: ObserveAt's n outside
// [0, MaxFloat32] (negative zero is 0: allowed); TryAcquire's max below
// 1 or above maxLimit (0 meaning 2^24); a window below 1 ms; each panic
// message starting "meter:", each error a *sketch.ConfigError.
func TestAudit88MeterBadInputs(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
	if err != nil {
		t.Fatal(err)
	}
	if msg := sketchtest.Panics(func() { r.ObserveAt(clk.Now(), "k", math.Copysign(0, -1)) }); msg != "" {
		t.Errorf("ObserveAt(-0): panic %q; want none", msg)
	}
	for _, n := range []float64{math.NaN(), -1e-300, math.Inf(-1), math.Inf(1), math.MaxFloat32 * 1.0000001} {
		if msg := sketchtest.Panics(func() { r.ObserveAt(clk.Now(), "k", n) }); !strings.HasPrefix(msg, "meter:") {
			t.Errorf("ObserveAt(%v): panic %q; want one starting meter:", n, msg)
		}
	}
	if got := r.PerSecondAt(clk.Now(), "k"); got != 0 {
		t.Errorf("after refused ObserveAts: %v/s; want 0", got)
	}
	in, err := meter.NewInflight(0, meter.WithSize(2, 16))
	if err != nil {
		t.Fatal(err)
	}
	if g := in.TryAcquire("k", 1<<24); g == nil {
		t.Error("TryAcquire(k, 2^24) on maxLimit 0 (2^24): refused")
	} else {
		g.Release()
	}
	for _, m := range []int{0, -1, 1<<24 + 1, math.MinInt} {
		if msg := sketchtest.Panics(func() { in.TryAcquire("k", m) }); !strings.HasPrefix(msg, "meter:") {
			t.Errorf("TryAcquire(k, %d): panic %q; want one starting meter:", m, msg)
		}
	}
	small, _ := meter.NewInflight(5, meter.WithSize(2, 16))
	if msg := sketchtest.Panics(func() { small.TryAcquire("k", 6) }); !strings.HasPrefix(msg, "meter:") {
		t.Errorf("TryAcquire(k, 6) on maxLimit 5: panic %q", msg)
	}
	if in.Count("k") != 0 || small.Count("k") != 0 {
		t.Error("a refused TryAcquire left a count")
	}
	var ce *sketch.ConfigError
	for name, err := range map[string]error{
		"inflight -1":       func() error { _, e := meter.NewInflight(-1); return e }(),
		"inflight 2^24+1":   func() error { _, e := meter.NewInflight(1<<24 + 1); return e }(),
		"rate 999us":        func() error { _, e := meter.NewRate(999 * time.Microsecond); return e }(),
		"novelty 0":         func() error { _, e := meter.NewNovelty(0); return e }(),
		"novelty -1s":       func() error { _, e := meter.NewNovelty(-time.Second); return e }(),
		"rate nil option":   func() error { _, e := meter.NewRate(time.Second, nil); return e }(),
		"novelty pw NaN":    func() error { _, e := meter.NewNovelty(time.Second, meter.WithPeriodWindows(math.NaN())); return e }(),
		"rate pw 0.999":     func() error { _, e := meter.NewRate(time.Second, meter.WithPeriodWindows(0.999)); return e }(),
		"inflight maxbytes": func() error { _, e := meter.NewInflight(1, meter.WithMaxBytes(-1)); return e }(),
	} {
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: %v; want a *sketch.ConfigError prefixed meter:", name, err)
		}
	}
}
