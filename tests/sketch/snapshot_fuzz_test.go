package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FuzzUnmarshal feeds arbitrary bytes to UnmarshalBinary and ReadFrom of
// a sketch built from a fixed config (L=2, M=8): neither may panic, every
// error is a *SnapshotError matching ErrCorruptSnapshot or
// ErrSnapshotMismatch, an accepted input re-encodes to a snapshot of the
// same cells, and nothing is allocated in proportion to the header (the
// lengths come from the config, so a forged L or M is a mismatch, not an
// allocation: checked with testing.AllocsPerRun on a forged header).
func FuzzUnmarshal(f *testing.F) {
	clock := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: -10, Hi: 1000, Decay: decay.Exponential(0.5), Clock: clock}
	src := mustNewSketch(f, cfg)
	for i, k := range snapKeys(12) {
		src.Update(k, float64(i*i)-5)
	}
	valid, _ := src.MarshalBinary()
	f.Add(valid)
	for _, n := range []int{0, 4, 87, 88, 95, len(valid) - 4, len(valid) - 1} {
		f.Add(valid[:n])
	}
	forged := bytes.Clone(valid)
	forged[12], forged[16] = 0xff, 0xff // L and M huge
	f.Add(forged)
	f.Add(append(bytes.Clone(valid), 1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, cfg, len(valid), data)
		// The same bytes with a correct checksum, so the fuzzer reaches
		// the header checks and the cell validation behind the CRC.
		if len(data) >= 4 {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed[len(fixed)-4:], crcOf(fixed[:len(fixed)-4]))
			checkDecode(t, cfg, len(valid), fixed)
		}
	})
}

func checkDecode(t *testing.T, cfg sketch.Config, validLen int, data []byte) {
	{
		s := mustNewSketch(t, cfg)
		err := s.UnmarshalBinary(data)
		if err != nil {
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("UnmarshalBinary: untyped error %v", err)
			}
		} else {
			// Re-encoded at the same instant (the fake clock stands
			// still), a record younger than 2^29 ms comes back as it was;
			// an older one was decayed once (no further from 0) and is
			// now of age 0.
			again, err := s.MarshalBinary()
			if err != nil || len(again) != len(data) {
				t.Fatalf("accepted input re-encodes to %d bytes of %d (err %v)", len(again), len(data), err)
			}
			le := binary.LittleEndian
			for i := 88; i < len(data)-4; i += 8 {
				was, now := math.Float32frombits(le.Uint32(data[i:])), math.Float32frombits(le.Uint32(again[i:]))
				if age := le.Uint32(data[i+4:]); age < 1<<29 {
					if !bytes.Equal(data[i:i+8], again[i:i+8]) {
						t.Fatalf("record %d (age %d) re-encodes differently", (i-88)/8, age)
					}
				} else if le.Uint32(again[i+4:]) != 0 || math.Abs(float64(now)) > math.Abs(float64(was)) || now*was < 0 {
					t.Fatalf("record %d (age %d): %v became %v", (i-88)/8, age, was, now)
				}
			}
		}
		s2 := mustNewSketch(t, cfg)
		n, err2 := s2.ReadFrom(bytes.NewReader(data))
		if err2 != nil && !errors.Is(err2, sketch.ErrCorruptSnapshot) && !errors.Is(err2, sketch.ErrSnapshotMismatch) {
			t.Fatalf("ReadFrom: untyped error %v", err2)
		}
		if err2 == nil && (n != int64(validLen) || n > int64(len(data))) {
			t.Fatalf("ReadFrom read %d bytes of %d", n, len(data))
		}
		if (err == nil) != (err2 == nil && n == int64(len(data))) {
			t.Fatalf("UnmarshalBinary %v but ReadFrom %v after %d of %d bytes", err, err2, n, len(data))
		}
	}
}

// TestUnmarshalForgedHeaderNoAlloc: a header claiming a huge sketch costs
// no allocation beyond the decoder's fixed buffer.
func TestUnmarshalForgedHeaderNoAlloc(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 10}
	s := mustNewSketch(t, cfg)
	data, _ := s.MarshalBinary()
	data[12], data[13], data[16], data[17], data[18] = 8, 0, 0, 0, 0x40 // L=8, M=2^30
	r := bytes.NewReader(data)
	// The 64 KiB chunk buffer and the error: a few allocations of fixed
	// size, none proportional to the header's L x M (64 GiB here).
	// Counted in bytes, the property itself: a count of allocations
	// would miss one huge one, and it also counts what other goroutines
	// allocate meanwhile (a count of 9 against 8 failed make test once).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		r.Reset(data)
		if _, err := s.ReadFrom(r); err == nil {
			t.Fatal("forged header accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1<<20 {
		t.Fatalf("%d bytes allocated per refused ReadFrom, want at most 1 MiB", per)
	}
}
