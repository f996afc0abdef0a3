package meter_test

// Audit 113 (snapshots): a meter decoder fuzz target that repairs every
// checksum of a meter snapshot (the meter header's, each generation's
// sketch snapshot's, and the rotator's), so the fuzzer reaches the cell
// and deadline checks that FuzzMeterReadFrom (which repairs only the
// meter header's and the rotator's, leaving every generation's CRC
// wrong) never gets past.
//
// Contract: meter/persist.go ReadFrom ("A different configuration is an
// error matching sketch.ErrSnapshotMismatch, a corrupt or truncated
// snapshot one matching sketch.ErrCorruptSnapshot; either way r is left
// unchanged"); docs/snapshots.md ("decoders ... never panic").

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const (
	a113L, a113M = 2, 8
	a113Gen      = 88 + 8*a113L*a113M + 4
	a113T0       = 1_790_000_000_000
)

var a113Tab = crc32.MakeTable(crc32.Castagnoli)

// a113FixCRCs repairs every checksum of a 2-generation meter snapshot of
// the a113 size in place (as far as the data is long enough).
func a113FixCRCs(b []byte) {
	le := binary.LittleEndian
	if len(b) >= 32 {
		le.PutUint32(b[28:], crc32.Checksum(b[:28], a113Tab))
	}
	rot := b[min(32, len(b)):]
	for g := 0; g < 2; g++ {
		off := 56 + g*a113Gen
		if len(rot) >= off+a113Gen {
			gb := rot[off : off+a113Gen]
			le.PutUint32(gb[a113Gen-4:], crc32.Checksum(gb[:a113Gen-4], a113Tab))
		}
	}
	if len(rot) >= 8 {
		le.PutUint32(rot[len(rot)-4:], crc32.Checksum(rot[:len(rot)-4], a113Tab))
	}
}

func a113NewRate(t testing.TB, clk *sketchtest.FakeClock, seed uint64) *meter.Rate {
	r, err := meter.NewRate(100*time.Millisecond, meter.WithClock(clk), meter.WithSeed(seed), meter.WithSize(a113L, a113M), meter.WithPeriodWindows(4))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func a113NewNovelty(t testing.TB, clk *sketchtest.FakeClock, seed uint64) *meter.Novelty {
	n, err := meter.NewNovelty(100*time.Millisecond, meter.WithClock(clk), meter.WithSeed(seed), meter.WithSize(a113L, a113M), meter.WithPeriodWindows(4))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func FuzzAudit113SnapMeterAllCRCs(f *testing.F) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a113T0)
	r := a113NewRate(f, clk, 1)
	n := a113NewNovelty(f, clk, 1)
	for i := range 40 {
		r.ObserveAt(clk.Now(), fmt.Sprint("k", i%7), float64(1+i%5))
		n.Seen(fmt.Sprint("k", i%9))
		clk.Advance(9 * time.Millisecond)
	}
	var rb, nb bytes.Buffer
	if _, err := r.WriteTo(&rb); err != nil {
		f.Fatal(err)
	}
	if _, err := n.WriteTo(&nb); err != nil {
		f.Fatal(err)
	}
	// the seeds reach the accepting path
	if _, err := a113NewRate(f, clk, 2).ReadFrom(bytes.NewReader(rb.Bytes())); err != nil {
		f.Fatal(err)
	}
	if _, err := a113NewNovelty(f, clk, 2).ReadFrom(bytes.NewReader(nb.Bytes())); err != nil {
		f.Fatal(err)
	}
	for kind, s := range [][]byte{rb.Bytes(), nb.Bytes()} {
		f.Add(s, uint8(kind))
		for _, off := range []int{32 + 16, 32 + 32, 32 + 40, 32 + 56 + 72, 32 + 56 + 88 + 1, 32 + 56 + 88 + 4, 32 + 56 + a113Gen + 88 + 7, len(s) - 12} {
			m := bytes.Clone(s)
			m[off] ^= 0x81
			f.Add(m, uint8(kind))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		data = bytes.Clone(data)
		a113FixCRCs(data)
		clk := sketchtest.NewFakeClock()
		clk.Set(a113T0 + 500)
		keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "zz"}
		if kind%2 == 0 {
			r := a113NewRate(t, clk, 9)
			r.Observe("zz")
			_, err := r.ReadFrom(bytes.NewReader(data))
			if err != nil {
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("untyped error: %v", err)
				}
				if g := r.PerSecond("zz"); g != 10 {
					t.Fatalf("refused (%v), but the meter changed: zz reads %v/s, want 10", err, g)
				}
				return
			}
			for _, k := range keys {
				if g := r.PerSecond(k); !(g >= 0) || math.IsInf(g, 0) {
					t.Fatalf("accepted snapshot: %s reads %v/s", k, g)
				}
			}
			for i := range 20 {
				r.Observe(keys[i%len(keys)])
				clk.Advance(37 * time.Millisecond)
			}
			var b bytes.Buffer
			if _, err := r.WriteTo(&b); err != nil && !errors.Is(err, sketch.ErrTakeAgain) {
				t.Fatalf("re-snapshot: %v", err)
			}
			return
		}
		n := a113NewNovelty(t, clk, 9)
		n.Seen("zz")
		_, err := n.ReadFrom(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("untyped error: %v", err)
			}
			if !n.Contains("zz") {
				t.Fatalf("refused (%v), but the meter forgot zz", err)
			}
			return
		}
		for i := range 30 {
			n.Contains(keys[i%len(keys)])
			n.Seen(keys[(i*3)%len(keys)])
			clk.Advance(23 * time.Millisecond)
		}
		// a mark made now is seen until T later, whatever was restored
		n.Seen("fresh")
		clk.Advance(99 * time.Millisecond)
		if !n.Contains("fresh") {
			t.Fatalf("accepted snapshot: a mark 99 ms old (T 100 ms) is forgotten")
		}
	})
}
