package meter_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79MaxBytesBoundary: WithMaxBytes caps the cells of all the
// meter's sketches together (Rate and Novelty two generations, Inflight
// one), 8-byte cells in rows padded to a cache line (8 cells): exactly the
// cap is accepted, one byte less is a *sketch.ConfigError.
func TestAudit79MaxBytesBoundary(t *testing.T) {
	// A row is padded to whole cache lines: 64 bytes (8 cells) on amd64,
	// 128 (16 cells) on arm64.
	line := int64(8)
	if runtime.GOARCH == "arm64" {
		line = 16
	}
	for _, c := range []struct {
		levels, cells uint32
	}{{4, 1000}, {3, 5}, {1, 1}, {2, 17}} {
		rowCells := (int64(c.cells) + line - 1) / line * line
		cellBytes := int64(c.levels) * rowCells * 8
		for _, k := range []struct {
			name  string
			gens  int64
			build func(n int64) error
		}{
			{"Rate", 2, func(n int64) error {
				_, err := meter.NewRate(time.Second, meter.WithSize(c.levels, c.cells), meter.WithMaxBytes(n))
				return err
			}},
			{"Novelty", 2, func(n int64) error {
				_, err := meter.NewNovelty(time.Second, meter.WithSize(c.levels, c.cells), meter.WithMaxBytes(n))
				return err
			}},
			{"Inflight", 1, func(n int64) error {
				_, err := meter.NewInflight(10, meter.WithSize(c.levels, c.cells), meter.WithMaxBytes(n))
				return err
			}},
		} {
			need := k.gens * cellBytes
			if err := k.build(need); err != nil {
				t.Errorf("%s %dx%d: MaxBytes %d (exactly its cells) refused: %v", k.name, c.levels, c.cells, need, err)
			}
			err := k.build(need - 1)
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("%s %dx%d: MaxBytes %d (one below its cells) gave %v, want a *sketch.ConfigError", k.name, c.levels, c.cells, need-1, err)
			}
		}
	}
	if _, err := meter.NewRate(time.Second, meter.WithMaxBytes(-1)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("MaxBytes -1: %v", err)
	}
}

// TestAudit79HeapMatchesSizing: a Rate of 2 x 4 x 65536 cells holds about
// 2 x 4 x 65536 x 8 = 4 MiB on the heap (the sizing the cap counts), not
// several times that.
func TestAudit79HeapMatchesSizing(t *testing.T) {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	r, err := meter.NewRate(time.Second, meter.WithSize(4, 1<<16))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&b)
	grew := int64(b.HeapAlloc) - int64(a.HeapAlloc)
	cells := int64(2 * 4 * (1 << 16) * 8)
	t.Logf("heap grew %d bytes for %d bytes of cells", grew, cells)
	if grew > cells+cells/8 {
		t.Errorf("heap grew %d bytes, cells are %d", grew, cells)
	}
	runtime.KeepAlive(r)
}

// TestAudit79NoAllocsSteady: Observe, ObserveAt, PerSecond, PerSecondAt,
// Seen, SeenAt, Contains, ContainsAt, Inflight.Count and a refused
// TryAcquire do not allocate between rotations (Rate: "Observe and
// PerSecond do not allocate"; Novelty: "it does not allocate, but for the
// call that builds a new generation").
func TestAudit79NoAllocsSteady(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1000)
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(4, 1024))
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(4, 1024))
	in, _ := meter.NewInflight(1, meter.WithSize(4, 1024))
	g := in.Acquire("held")
	defer g.Release()
	now := clk.Now()
	for name, f := range map[string]func(){
		"Rate.Observe":         func() { r.Observe("k") },
		"Rate.ObserveAt":       func() { r.ObserveAt(now, "k", 2) },
		"Rate.PerSecond":       func() { _ = r.PerSecond("k") },
		"Rate.PerSecondAt":     func() { _ = r.PerSecondAt(now, "k") },
		"Novelty.Seen":         func() { _ = n.Seen("k") },
		"Novelty.SeenAt":       func() { _ = n.SeenAt(now, "k") },
		"Novelty.Contains":     func() { _ = n.Contains("k") },
		"Novelty.ContainsAt":   func() { _ = n.ContainsAt(now, "k") },
		"Inflight.Count":       func() { _ = in.Count("held") },
		"Inflight.TryAcquire0": func() { _ = in.TryAcquire("held", 1) },
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocs/op", name, a)
		}
	}
}
