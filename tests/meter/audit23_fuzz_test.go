package meter_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit23FixCRCs repairs every checksum of a meter snapshot of a meter
// built WithSize(levels, cells) with 2 generations: the meter header's,
// each generation's and the rotator's, so that a fuzzer's mutation of a
// field reaches the checks behind the checksums.
func audit23FixCRCs(data []byte, levels, cells int) []byte {
	const meterHdr, rotHdr, skHdr = 32, 56, 88
	gen := skHdr + 8*levels*cells + 4
	if len(data) != meterHdr+rotHdr+2*gen+4 {
		return data
	}
	data = bytes.Clone(data)
	le, tab := binary.LittleEndian, crc32.MakeTable(crc32.Castagnoli)
	le.PutUint32(data[28:], crc32.Checksum(data[:28], tab))
	for g := range 2 {
		off := meterHdr + rotHdr + g*gen
		le.PutUint32(data[off+gen-4:], crc32.Checksum(data[off:off+gen-4], tab))
	}
	le.PutUint32(data[len(data)-4:], crc32.Checksum(data[meterHdr:len(data)-4], tab))
	return data
}

// FuzzAudit23MeterReadFrom: ReadFrom of hostile bytes (every checksum
// repaired on demand) into a Rate or a Novelty that already holds
// state: the error, if any, matches ErrCorruptSnapshot or
// ErrSnapshotMismatch and leaves the meter as it was ("the meter is then
// left as it was"); never a panic; and after an accepted snapshot every
// reading is finite, non-negative and within the cells' range.
func FuzzAudit23MeterReadFrom(f *testing.F) {
	const levels, cells = 2, 4
	build := func(i int, clk *sketchtest.FakeClock) (io.ReaderFrom, func(string) float64) {
		opts := []meter.Option{meter.WithClock(clk), meter.WithSize(levels, cells), meter.WithSeed(uint64(i))}
		if i%2 == 0 {
			r, _ := meter.NewRate(time.Second, opts...)
			for k := range 6 {
				r.ObserveAt(clk.Now(), fmt.Sprint(k), float64(k+1))
			}
			return r, func(k string) float64 { return r.PerSecond(k) }
		}
		n, _ := meter.NewNovelty(time.Second, opts...)
		for k := range 3 {
			n.Seen(fmt.Sprint(k))
		}
		return n, func(k string) float64 {
			if n.Contains(k) {
				return 1
			}
			return 0
		}
	}
	for i := range 2 {
		clk := sketchtest.NewFakeClock()
		clk.Set(audit23T0)
		m, _ := build(i, clk)
		var b bytes.Buffer
		m.(io.WriterTo).WriteTo(&b)
		f.Add(b.Bytes(), uint8(i), false)
		f.Add(b.Bytes(), uint8(i), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fix bool) {
		if fix {
			data = audit23FixCRCs(data, levels, cells)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(audit23T0 + 300)
		i := int(which % 2)
		m, read := build(i, clk)
		var before [8]float64
		for k := range before {
			before[k] = read(fmt.Sprint(k))
		}
		_, err := m.ReadFrom(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("untyped error: %v", err)
			}
			for k := range before {
				if got := read(fmt.Sprint(k)); got != before[k] {
					t.Fatalf("refused snapshot (%v) changed key %d: %v, was %v", err, k, got, before[k])
				}
			}
			return
		}
		for k := range 8 {
			v := read(fmt.Sprint(k))
			if !(v >= 0) || math.IsInf(v, 0) || v > math.MaxFloat32 {
				t.Fatalf("accepted snapshot: key %d reads %v", k, v)
			}
		}
		clk.Advance(5 * time.Second)
		for k := range 8 {
			if v := read(fmt.Sprint(k)); !(v >= 0) || v > math.MaxFloat32 {
				t.Fatalf("accepted snapshot, 5 s on: key %d reads %v", k, v)
			}
		}
	})
}
