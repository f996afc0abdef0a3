package meter_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Rate.ReadFrom's godoc: r must be built with the window the snapshot
// was taken under; a different configuration is an error matching
// sketch.ErrSnapshotMismatch, and r is left unchanged. Two windows 1 ns
// apart above 2^53 ns have the same float64 seconds, hence the same decay
// rate and the same rotation Period: only the meter's own header tells
// them apart, so its window check is what must refuse.
func TestAudit14MutSnapshotWindowOneNanosecondApart(t *testing.T) {
	const w1 = time.Duration(1 << 54)
	const w2 = w1 + 1
	for _, kind := range []string{"Rate", "Novelty"} {
		t.Run(kind, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			opts := []meter.Option{meter.WithClock(clk), meter.WithSize(1, 8), meter.WithSeed(1)}
			var buf bytes.Buffer
			var read func() error
			var probe func() bool
			switch kind {
			case "Rate":
				src, err := meter.NewRate(w1, opts...)
				if err != nil {
					t.Fatal(err)
				}
				src.ObserveAt(clk.Now(), "k", 5)
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				dst, err := meter.NewRate(w2, opts...)
				if err != nil {
					t.Fatal(err)
				}
				read = func() error { _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); return err }
				probe = func() bool { return dst.PerSecondAt(clk.Now(), "k") == 0 }
			case "Novelty":
				src, err := meter.NewNovelty(w1, opts...)
				if err != nil {
					t.Fatal(err)
				}
				src.SeenAt(clk.Now(), "k")
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				dst, err := meter.NewNovelty(w2, opts...)
				if err != nil {
					t.Fatal(err)
				}
				read = func() error { _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); return err }
				probe = func() bool { return !dst.ContainsAt(clk.Now(), "k") }
			}
			err := read()
			if !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("snapshot of window %d ns read into window %d ns: err %v, want ErrSnapshotMismatch", int64(w1), int64(w2), err)
			}
			if !probe() {
				t.Errorf("refused ReadFrom changed the meter")
			}
		})
	}
}

// docs/snapshots.md, "What is checked on restore": magic, version, kind
// and reserved bytes (ErrCorruptSnapshot). The meter header's reserved
// bytes (7 and 24..27) must be zero even under a recomputed header
// checksum (a forged or future-format header); the meter is left
// unchanged.
func TestAudit14MutSnapshotReservedHeaderBytes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	opts := []meter.Option{meter.WithClock(clk), meter.WithSize(1, 8), meter.WithSeed(1)}
	src, err := meter.NewRate(time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	src.ObserveAt(clk.Now(), "k", 5)
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	// The untouched snapshot restores (the test's own sanity check).
	ok, err := meter.NewRate(time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ok.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("untouched snapshot: %v", err)
	}
	for _, off := range []int{7, 24, 25, 26, 27} {
		data := bytes.Clone(buf.Bytes())
		data[off] = 1
		binary.LittleEndian.PutUint32(data[28:], crc32.Checksum(data[:28], crc32.MakeTable(crc32.Castagnoli)))
		dst, err := meter.NewRate(time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(data)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("reserved header byte %d set (checksum recomputed): err %v, want ErrCorruptSnapshot", off, err)
		}
		if v := dst.PerSecondAt(clk.Now(), "k"); v != 0 {
			t.Errorf("reserved header byte %d: refused ReadFrom changed the meter (k reads %v)", off, v)
		}
	}
}
