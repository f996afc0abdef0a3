package sketch_test

// Audit 134: Merge fed with sketches restored from hostile snapshots
// (any input with its checksum repaired, so forged cells, ages, instants
// and header fields get past the CRC), in both directions, with and
// without a Linear overlap.
//
// Contract: sketch.Merge (merge "clamped to [Lo, Hi]"; refuses
// "(ErrSnapshotMismatch) a sketch of another configuration, or s
// itself"), docs/snapshots.md "Merge" ("Merge never falls below either
// input's truth" for non-negative deltas; the table: None a + b, Exponential
// a + b, Linear a + b or max(a, b)), "Guarantees" ("Every score must be
// finite and within [Lo, Hi], else the snapshot is corrupt").
//
// Checked for every accepted forged snapshot A (restored into a sketch)
// merged with a sketch B fed normally on a clock ahead, behind or at A's:
//   - Merge returns nil (same configuration; not the same sketch);
//   - every key of both reads finite and within [Lo, Hi] after it;
//   - when every score of both snapshots is >= 0, every key reads at or
//     above what it read in each input just before the merge (less a
//     float32 ulp of rounding);
//   - the merged sketch snapshots and restores again.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a134NonNegative(b []byte) bool {
	for o := 88; o+8 <= len(b)-4; o += 8 {
		if math.Float32frombits(binary.LittleEndian.Uint32(b[o:])) < 0 {
			return false
		}
	}
	return true
}

func a134MergeSeeds() [][]byte {
	var out [][]byte
	for w := range uint8(3) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a88FuzzT0)
		s, _ := sketch.New(a88FuzzCfg(w, clk))
		a88FuzzFill(s, clk, 0)
		snap, _ := s.MarshalBinary()
		out = append(out, snap)
		hi := bytes.Clone(snap)
		for o := 88; o+8 <= len(hi)-4; o += 8 {
			binary.LittleEndian.PutUint32(hi[o:], math.Float32bits(50)) // every cell at Hi
			binary.LittleEndian.PutUint32(hi[o+4:], 0xff000000)         // stated 2^24 ms after T
		}
		out = append(out, hi)
		lo := bytes.Clone(snap)
		for o := 88; o+8 <= len(lo)-4; o += 8 {
			binary.LittleEndian.PutUint32(lo[o:], math.Float32bits(-20)) // every cell at Lo
			binary.LittleEndian.PutUint32(lo[o+4:], 0x80000000)
		}
		out = append(out, lo)
		far := bytes.Clone(snap)
		binary.LittleEndian.PutUint64(far[72:], uint64(a88FuzzT0+100*365*24*3600*1000)) // T a century ahead
		out = append(out, far)
		old := bytes.Clone(snap)
		binary.LittleEndian.PutUint64(old[72:], 1) // T in 1970
		out = append(out, old)
		tiny := bytes.Clone(snap)
		for o := 88; o+8 <= len(tiny)-4; o += 8 {
			binary.LittleEndian.PutUint32(tiny[o:], 1) // least subnormal
			binary.LittleEndian.PutUint32(tiny[o+4:], 0x7fffffff)
		}
		out = append(out, tiny)
	}
	return out
}

func a134MergeCheck(t *testing.T, data []byte, which uint8, skewMs int16, overlapMs uint16) {
	a134MergeRun(t, data, which, skewMs, overlapMs)
}

// a134MergeRun reports whether the forged snapshot was accepted.
func a134MergeRun(t *testing.T, data []byte, which uint8, skewMs int16, overlapMs uint16) bool {
	data = bytes.Clone(data)
	a88FixCRC(data)
	clkA := sketchtest.NewFakeClock()
	clkA.Set(a88FuzzT0 + 1234)
	clkB := sketchtest.NewFakeClock()
	clkB.Set(a88FuzzT0 + 1234 + int64(skewMs)*10)
	cfgA, cfgB := a88FuzzCfg(which, clkA), a88FuzzCfg(which, clkB)
	a, err := sketch.New(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UnmarshalBinary(data); err != nil {
		return false // refusals are audit 88's
	}
	snapA, err := a.MarshalBinary()
	if err != nil {
		t.Fatalf("restored sketch does not snapshot: %v", err)
	}
	b, err := sketch.New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	a88FuzzFill(b, clkB, 1)
	snapB, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	nonneg := a134NonNegative(snapA) && a134NonNegative(snapB)
	keys := make([]string, 0, 24)
	for i := range 12 {
		for _, salt := range []int{0, 1} {
			keys = append(keys, fmt.Sprint("f", i, "/", salt))
		}
	}
	overlap := time.Duration(overlapMs) * time.Millisecond
	for dir := range 2 {
		// Fresh copies of both sides for each direction.
		x, _ := sketch.New(cfgA)
		y, _ := sketch.New(cfgB)
		if err := x.UnmarshalBinary(snapA); err != nil {
			t.Fatalf("re-restore of A: %v", err)
		}
		if err := y.UnmarshalBinary(snapB); err != nil {
			t.Fatalf("re-restore of B: %v", err)
		}
		into, from := x, y
		if dir == 1 {
			into, from = y, x
		}
		qi := make([]float64, len(keys))
		qf := make([]float64, len(keys))
		for k, key := range keys {
			qi[k], qf[k] = into.QueryString(key), from.QueryString(key)
		}
		if err := into.Merge(from, overlap); err != nil {
			t.Fatalf("dir %d: Merge of the same configuration refused: %v", dir, err)
		}
		for k, key := range keys {
			v := into.QueryString(key)
			if math.IsNaN(v) || v < cfgA.Lo || v > cfgA.Hi {
				t.Fatalf("dir %d: %s reads %v after the merge, outside [Lo, Hi]", dir, key, v)
			}
			if nonneg {
				lb := math.Max(qi[k], qf[k])
				ulp := float64(math.Nextafter32(float32(lb), float32(math.Inf(1)))) - lb
				if v < lb-ulp {
					t.Fatalf("dir %d: %s reads %v after the merge, below an input (%v into, %v from)", dir, key, v, qi[k], qf[k])
				}
			}
		}
		if _, err := into.MarshalBinary(); err != nil {
			t.Fatalf("dir %d: merged sketch does not snapshot: %v", dir, err)
		}
	}
	return true
}

func FuzzAudit134SnapMergeForged(f *testing.F) {
	for i, s := range a134MergeSeeds() {
		f.Add(s, uint8(i/6), int16(0), uint16(0))
		f.Add(s, uint8(i/6), int16(300), uint16(5))
		f.Add(s, uint8(i/6), int16(-300), uint16(0))
	}
	f.Fuzz(a134MergeCheck)
}

// TestAudit134SnapMergeForgedSeeds runs the fuzz property on its seeds
// (and on what a short fuzz run found interesting) as a regular test.
func TestAudit134SnapMergeForgedSeeds(t *testing.T) {
	accepted := 0
	for i, s := range a134MergeSeeds() {
		for _, skew := range []int16{0, 300, -300, 32767, -32768} {
			for _, ov := range []uint16{0, 7} {
				t.Run(fmt.Sprint(i, "/", skew, "/", ov), func(t *testing.T) {
					if a134MergeRun(t, s, uint8(i/6), skew, ov) {
						accepted++
					} else if i%6 == 0 {
						t.Fatalf("an unforged snapshot was refused")
					}
				})
			}
		}
	}
	t.Logf("%d of %d accepted", accepted, 3*6*5*2)
	if accepted < 3*5*2*4 {
		t.Fatalf("only %d seeds accepted: the forgeries test little", accepted)
	}
}
