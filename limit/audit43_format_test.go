package limit_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// docs/snapshots.md, "Limiters and meters": the 64-byte limiter header and
// "A bucket snapshot ... is 104 + 64 x Lines + 16 + 4 bytes".
func TestAudit43LimiterSnapshotHeader(t *testing.T) {
	le := binary.LittleEndian
	// Buckets: limit.New(10, 20)
	l := limit.MustNew(10, 20)
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	lines := uint64(l.Sizes().Cells/64 - 1)
	if string(b[:4]) != "GRDG" || b[4] != 1 || b[5] != 4 || b[6] != 1 || b[7] != 0 {
		t.Errorf("Buckets header bytes 0..7 = %v; doc: GRDG, 1, kind 4, engine 1, flags 0", b[:8])
	}
	if got := math.Float64frombits(le.Uint64(b[24:])); got != 40 {
		t.Errorf("MaxDebt field %v, want 40", got)
	}
	if got := le.Uint64(b[32:]); got != lines {
		t.Errorf("size field %d, doc: Lines = %d", got, lines)
	}
	if le.Uint32(b[40:]) != 0 || le.Uint64(b[48:]) != 0 {
		t.Errorf("Buckets Generations %d Period %d, doc: 0", le.Uint32(b[40:]), le.Uint64(b[48:]))
	}
	if le.Uint32(b[60:]) != crc32.Checksum(b[:60], crc32.MakeTable(crc32.Castagnoli)) {
		t.Errorf("header CRC-32C of bytes 0..59 does not match")
	}
	// unit x token, drain per ms: 10/s drains 0.01 token per ms
	unit, drain := math.Float64frombits(le.Uint64(b[8:])), math.Float64frombits(le.Uint64(b[16:]))
	if math.Abs(drain/unit-0.01) > 1e-15 {
		t.Errorf("drain/unit = %v tokens per ms, want 0.01 (unit %v, drain %v)", drain/unit, unit, drain)
	}
	if want := 64 + 104 + 64*int(lines) + 16 + 4; len(b) != want || int64(len(b)) != l.SnapshotSize() {
		t.Errorf("Buckets limiter snapshot %d bytes (SnapshotSize %d), doc: 64 + 104 + 64 x Lines + 16 + 4 = %d", len(b), l.SnapshotSize(), want)
	}
	if string(b[64:68]) != "GRDG" || b[69] != 3 {
		t.Errorf("engine snapshot at 64: %q kind %d, doc: bucket snapshot kind 3", b[64:68], b[69])
	}

	// CountMin: limit.New(10, 20, WithEngine(CountMin), WithConservativeUpdate(true), WithGenerations(3))
	cm := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(true), limit.WithGenerations(3), limit.WithSize(3, 1000))
	buf.Reset()
	if _, err := cm.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b = buf.Bytes()
	if b[6] != 2 || b[7]&1 != 1 {
		t.Errorf("CountMin engine %d flags %d; doc: engine 2, flag bit 0 conservative", b[6], b[7])
	}
	if got := le.Uint64(b[32:]); got != 3<<32|1000 {
		t.Errorf("CountMin size field %#x, doc: Levels << 32 | CellsPerLevel = %#x", got, uint64(3<<32|1000))
	}
	if le.Uint32(b[40:]) != 3 || le.Uint64(b[48:]) != uint64(cm.Period().Milliseconds()) {
		t.Errorf("Generations %d Period %d ms, want 3 and %d", le.Uint32(b[40:]), le.Uint64(b[48:]), cm.Period().Milliseconds())
	}
	if want := 64 + 56 + 3*(88+8*3*1000+4) + 4; len(b) != want {
		t.Errorf("CountMin limiter snapshot %d bytes, doc: 64 + rotator's %d", len(b), want)
	}
	if b[64+5] != 2 {
		t.Errorf("engine snapshot kind %d, doc: rotator 2", b[69])
	}
	// Inf: "nothing for Inf"
	inf := limit.MustNew(limit.Inf, 1)
	buf.Reset()
	if _, err := inf.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 64 || buf.Bytes()[6] != 0 {
		t.Errorf("Inf limiter snapshot %d bytes engine %d, doc: the header only, engine 0", buf.Len(), buf.Bytes()[6])
	}
}
