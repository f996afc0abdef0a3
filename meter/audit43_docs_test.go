package meter_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a43panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			switch v := r.(type) {
			case string:
				msg = v
			case error:
				msg = v.Error()
			default:
				msg = "?"
			}
		}
	}()
	f()
	return ""
}

// meter/doc.go: zero values panic with the quoted texts.
func TestAudit43ZeroPanics(t *testing.T) {
	var r meter.Rate
	var in meter.Inflight
	var n meter.Novelty
	if m := a43panic(func() { r.Observe("k") }); m != "meter: zero Rate; use NewRate" {
		t.Errorf("zero Rate panic %q", m)
	}
	if m := a43panic(func() { in.Acquire("k") }); m != "meter: zero Inflight; use NewInflight" {
		t.Errorf("zero Inflight panic %q", m)
	}
	if m := a43panic(func() { n.Seen("k") }); m != "meter: zero Novelty; use NewNovelty" {
		t.Errorf("zero Novelty panic %q", m)
	}
	var g meter.Guard
	if m := a43panic(func() { g.Release() }); m != "" {
		t.Errorf("zero Guard Release panicked %q; migrating.md: does nothing", m)
	}
}

// docs/snapshots.md: "A default meter.Rate or meter.Novelty snapshot is
// 6,400,276 bytes (its rotator's, plus 32)."
func TestAudit43SnapshotSizes(t *testing.T) {
	r, err := meter.NewRate(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n, err := meter.NewNovelty(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.SnapshotSize(); s != 6_400_276 {
		t.Errorf("Rate SnapshotSize %d, docs say 6,400,276", s)
	}
	if s := n.SnapshotSize(); s != 6_400_276 {
		t.Errorf("Novelty SnapshotSize %d, docs say 6,400,276", s)
	}
}

// Rate: "C/window estimates the rate", decaying as exp(-t/window).
func TestAudit43RateModel(t *testing.T) {
	c := sketchtest.NewFakeClock()
	r, err := meter.NewRate(2*time.Second, meter.WithClock(c), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	t0 := c.Now()
	r.ObserveAt(t0, "k", 100)
	if got := r.PerSecondAt(t0, "k"); math.Abs(got-50) > 50e-6 {
		t.Errorf("100 events, window 2s: PerSecond %v, want 50", got)
	}
	c.Advance(2 * time.Second)
	t1 := c.Now()
	if got, want := r.PerSecondAt(t1, "k"), 50*math.Exp(-1); math.Abs(got-want) > want*1e-5 || got < want*(1-1e-9) {
		t.Errorf("after one window PerSecond %v, want %v", got, want)
	}
	if r.Window() != 2*time.Second {
		t.Errorf("Window %v", r.Window())
	}
	// "panics (meter: ...) on n > MaxFloat32"
	if m := a43panic(func() { r.ObserveAt(t1, "k", 1e39) }); !strings.HasPrefix(m, "meter: ") {
		t.Errorf("ObserveAt(1e39) panic %q, migrating.md: panics (meter: ...)", m)
	}
}

// Novelty: "seen while the Min of its cells is above theta = exp(-1),
// which the key's own mark stays above for exactly T".
func TestAudit43NoveltyWithinT(t *testing.T) {
	c := sketchtest.NewFakeClock()
	n, err := meter.NewNovelty(time.Second, meter.WithClock(c), meter.WithSeed(2))
	if err != nil {
		t.Fatal(err)
	}
	t0 := c.Now()
	if n.SeenAt(t0, "a") {
		t.Fatalf("first Seen said seen")
	}
	c.Advance(999 * time.Millisecond)
	if !n.ContainsAt(c.Now(), "a") {
		t.Errorf("not contained at T-1ms")
	}
	c.Advance(time.Millisecond)
	if !n.ContainsAt(c.Now(), "a") {
		t.Logf("not contained at exactly T (doc: stays above for exactly T)")
	}
	c.Advance(2 * time.Millisecond)
	if n.ContainsAt(c.Now(), "a") {
		t.Errorf("still contained at T+2ms")
	}
	if n.SeenAt(c.Now(), "a") {
		t.Errorf("Seen at T+2ms said seen; doc: seen within the last T")
	}
	if n.Within() != time.Second {
		t.Errorf("Within %v", n.Within())
	}
}

// meter/doc.go: constructor errors are *sketch.ConfigError naming the
// field, a nil Option included, starting "meter: ".
func TestAudit43ConstructorErrors(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: err %v, doc: *sketch.ConfigError starting meter: ", name, err)
		}
	}
	_, err := meter.NewRate(0)
	check("NewRate(0)", err)
	_, err = meter.NewRate(time.Second, nil)
	check("NewRate nil option", err)
	_, err = meter.NewNovelty(-time.Second)
	check("NewNovelty(-1s)", err)
	_, err = meter.NewInflight(-1)
	check("NewInflight(-1)", err)
	_, err = meter.NewInflight(1<<24 + 1)
	check("NewInflight(2^24+1)", err)
	_, err = meter.NewRate(time.Second, meter.WithPeriodWindows(0.5))
	check("WithPeriodWindows(0.5)", err)
	_, err = meter.NewRate(time.Second, meter.WithSize(4, 1<<30), meter.WithMaxBytes(1<<20))
	check("WithMaxBytes", err)
	_, err = meter.NewNovelty(time.Second, meter.WithPeriodWindows(1))
	if err != nil {
		t.Errorf("WithPeriodWindows(1) refused (doc: at least 1): %v", err)
	}
}

// Inflight: "N goroutines racing TryAcquire(k, 100) without releasing get
// exactly 100 guards"; Release idempotent.
func TestAudit43InflightExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(1000, meter.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		const N = 8
		got := make(chan int, N)
		for g := 0; g < N; g++ {
			go func() {
				k := 0
				for i := 0; i < 40; i++ {
					if in.TryAcquire("k", 100) != nil {
						k++
					}
				}
				got <- k
			}()
		}
		total := 0
		for g := 0; g < N; g++ {
			total += <-got
		}
		if total != 100 || in.Count("k") != 100 {
			t.Errorf("admitted %d, Count %d; doc: exactly 100", total, in.Count("k"))
		}
		gd := in.Acquire("j")
		gd.Release()
		gd.Release()
		if in.Count("j") != 0 {
			t.Errorf("double Release: Count %d", in.Count("j"))
		}
	})
}

// meter/doc.go: "Period 16 windows by default"; the snapshot header holds
// "the window in ns, the Period in ms" (docs/snapshots.md).
func TestAudit43MeterDefaultPeriod(t *testing.T) {
	r, err := meter.NewRate(1500*time.Millisecond, meter.WithSize(1, 8))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	if b[5] != 5 || le.Uint64(b[8:]) != uint64(1500*time.Millisecond) || le.Uint64(b[16:]) != 24000 {
		t.Errorf("meter header kind %d window %d ns Period %d ms; doc: kind 5, 1.5e9 ns, 16 windows = 24000 ms", b[5], le.Uint64(b[8:]), le.Uint64(b[16:]))
	}
}
