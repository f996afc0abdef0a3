package sketch_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a152Lin is a custom law (KindCustom: the restore keeps a cell stated
// ahead as is, not read back): linear toward 0 by rate per second.
type a152Lin struct{ rate float64 }

func (l a152Lin) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	d := l.rate * float64(dt) / 1000
	switch {
	case s > d:
		return s - d
	case s < -d:
		return s + d
	}
	return 0
}

// a152Ahead returns a snapshot of a sketch on a clock at base holding
// k = 50, every non-zero cell's age forged to -ahead ms (stated ahead of
// the instant, as a cell written during the encode is), CRC recomputed.
func a152Ahead(t *testing.T, cfg sketch.Config, base, ahead int64) []byte {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(base)
	cfg.Clock = clk
	s := mustNewSketch(t, cfg)
	s.UpdateString("k", 50)
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	n := 0
	for j := 88; j+8 <= len(b)-4; j += 8 {
		if le.Uint32(b[j:]) != 0 {
			le.PutUint32(b[j+4:], uint32(int32(-ahead)))
			n++
		}
	}
	if n == 0 {
		t.Fatal("no cell holds k")
	}
	le.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestAudit152RestoreAheadNearMaxInt64: internal/core/snapshot.go
// readFrom stamps a cell stated ahead (total < 0) at s.stamp(ms - total);
// on a clock within 1000 ms of MaxInt64, ms - total wraps in int64. The
// stamp is the 32-bit difference from the epoch, so the wrap (mod 2^64)
// leaves it right (mod 2^32): k, stated 1000 ms ahead of a restore at
// MaxInt64-500, reads 50 then and at MaxInt64 (its lead is never
// reached, as without the wrap), never 0 or above 50; restored at
// MaxInt64-2000 it reads 50 until MaxInt64-1000 and 49 at MaxInt64 (1 s
// of 1/s after its stamp), as the control at 0 ms does at 2000 ms.
func TestAudit152RestoreAheadNearMaxInt64(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: a152Lin{1}, Hi: 1e9, Seed: 152}
	for _, c := range []struct {
		base  int64
		steps []int64 // ms after base
		want  []float64
	}{
		{0, []int64{0, 500, 1000, 2000, 3000}, []float64{50, 50, 50, 49, 48}},
		{math.MaxInt64 - 500, []int64{0, 250, 500}, []float64{50, 50, 50}},
		{math.MaxInt64 - 2000, []int64{0, 500, 1000, 1500, 2000}, []float64{50, 50, 50, 49.5, 49}},
	} {
		snap := a152Ahead(t, cfg, c.base, 1000)
		clk := sketchtest.NewFakeClock()
		clk.Set(c.base)
		rc := cfg
		rc.Clock = clk
		s := mustNewSketch(t, rc)
		if _, err := s.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatalf("base %d: %v", c.base, err)
		}
		for i, step := range c.steps {
			clk.Set(c.base + step)
			s.UpdateString("other", 1) // the write paths and the horizon run too
			if got := s.QueryString("k"); math.Abs(got-c.want[i]) > 1e-3 {
				t.Errorf("restored at %d, %d ms later: k reads %v, want %v", c.base, step, got, c.want[i])
			}
		}
	}
}
