package meter_test

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
)

// Rate's Observe and PerSecond and Novelty's Seen and Contains do not
// allocate (outside the one call per Period that builds a generation).
func TestAudit40NoAllocs(t *testing.T) {
	clk := a40Clock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	in, _ := meter.NewInflight(100, meter.WithSize(2, 64))
	for name, f := range map[string]func(){
		"Observe":     func() { r.Observe("k") },
		"ObserveAt":   func() { r.ObserveAt(clk.Now(), "k", 2) },
		"PerSecond":   func() { r.PerSecond("k") },
		"PerSecondAt": func() { r.PerSecondAt(clk.Now(), "k") },
		"Seen":        func() { n.Seen("k") },
		"SeenAt":      func() { n.SeenAt(clk.Now(), "k2") },
		"Contains":    func() { n.Contains("k") },
		"Count":       func() { in.Count("k") },
		"TryAcquireDenied": func() {
			if g := in.TryAcquire("zz", 1); g != nil {
				_ = g
			}
		},
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
}

// Limits: the extreme window sizes the constructors promise to take.
func TestAudit40ExtremeWindows(t *testing.T) {
	max := time.Duration(1 << 62)
	for _, c := range []struct {
		w  time.Duration
		pw float64
	}{{max, 1}, {max / 16, 16}, {time.Millisecond, 1}, {time.Millisecond + 1, 1}} {
		clk := a40Clock()
		r, err := meter.NewRate(c.w, meter.WithClock(clk), meter.WithSize(2, 16), meter.WithPeriodWindows(c.pw))
		if err != nil {
			t.Errorf("NewRate(%v, pw %v): %v", c.w, c.pw, err)
			continue
		}
		r.Observe("k")
		// PerSecond is 1 event / window rounded up: never below the
		// exact quotient (1/c.w.Seconds() may round above it).
		if got, want := r.PerSecond("k"), 1/c.w.Seconds(); new(big.Rat).SetFloat64(got).Cmp(big.NewRat(1e9, int64(c.w))) < 0 || got > want*1.0001 {
			t.Errorf("NewRate(%v): one event reads %v", c.w, got)
		}
		n, err := meter.NewNovelty(c.w, meter.WithClock(clk), meter.WithSize(2, 16), meter.WithPeriodWindows(c.pw))
		if err != nil {
			t.Errorf("NewNovelty(%v, pw %v): %v", c.w, c.pw, err)
			continue
		}
		if n.Seen("k") || !n.Seen("k") {
			t.Errorf("NewNovelty(%v): Seen wrong", c.w)
		}
		var buf bytes.Buffer
		if k, err := r.WriteTo(&buf); err != nil || k != r.SnapshotSize() {
			t.Errorf("WriteTo(%v): %d %v, size %d", c.w, k, err, r.SnapshotSize())
		}
	}
	for _, c := range []struct {
		w  time.Duration
		pw float64
	}{{max + 1024, 1}, {max / 16, 16.001}, {time.Millisecond - 1, 1}} {
		if _, err := meter.NewRate(c.w, meter.WithPeriodWindows(c.pw)); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("NewRate(%v, %v): %v, want ErrInvalidConfig", c.w, c.pw, err)
		}
	}
}

// ReadFrom reads exactly its bytes: two snapshots back to back restore
// one after the other, and SnapshotSize is what WriteTo wrote.
func TestAudit40ReadExactlyItsBytes(t *testing.T) {
	clk := a40Clock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 32))
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(3, 16))
	r.Observe("a")
	n.Seen("b")
	var buf bytes.Buffer
	k1, _ := r.WriteTo(&buf)
	k2, _ := n.WriteTo(&buf)
	if k1 != r.SnapshotSize() || k2 != n.SnapshotSize() {
		t.Fatalf("sizes %d %d, SnapshotSize %d %d", k1, k2, r.SnapshotSize(), n.SnapshotSize())
	}
	buf.WriteString("tail")
	r2, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 32))
	n2, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(3, 16))
	if m, err := r2.ReadFrom(&buf); err != nil || m != k1 {
		t.Fatalf("Rate ReadFrom %d %v", m, err)
	}
	if m, err := n2.ReadFrom(&buf); err != nil || m != k2 {
		t.Fatalf("Novelty ReadFrom %d %v", m, err)
	}
	rest, _ := io.ReadAll(&buf)
	if string(rest) != "tail" || r2.PerSecond("a") != r.PerSecond("a") || !n2.Contains("b") {
		t.Fatalf("rest %q, a %v vs %v", rest, r2.PerSecond("a"), r.PerSecond("a"))
	}
}

// NewRate and NewNovelty promise to refuse a window x PeriodWindows above
// 2^62 ns, because a Period shorter than the window breaks what each type
// promises. A window 1..512 ns above 2^62 is accepted (float64 rounding in
// checkPeriod), and its Period is then shorter than the window.
func TestAudit40FixedWindowAboveMaxAccepted(t *testing.T) {
	w := time.Duration(1<<62) + 1
	var bad []string
	if _, err := meter.NewRate(w, meter.WithPeriodWindows(1)); err == nil {
		bad = append(bad, "NewRate")
	}
	if _, err := meter.NewNovelty(w, meter.WithPeriodWindows(1)); err == nil {
		bad = append(bad, "NewNovelty")
	}
	if len(bad) > 0 {
		t.Errorf("%v accepted window %d ns = 2^62+1 ns with PeriodWindows 1: want a *sketch.ConfigError "+
			"(meter/rate.go NewRate: \"window x PeriodWindows at most 2^62 ns ... A shorter or longer window ... is a *sketch.ConfigError\")", bad, int64(w))
	}
}
