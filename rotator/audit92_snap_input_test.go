package rotator_test

// Audit 92 (rotator snapshots): damaged, truncated and odd streams.
//
// Contract: Rotator.UnmarshalBinary ("A refused snapshot leaves r
// unchanged"), Rotator.ReadFrom ("reading exactly its bytes ... On any
// error the rotator is left unchanged"), sketch.ErrCorruptSnapshot
// ("truncated, trailing bytes, bad checksum"), docs/snapshots.md ("A
// rotator builds new generations and publishes them only on success: a
// failed restore never changes it"). These cut at every length and flip
// every bit, the checksums stale and repaired.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const (
	a92RotGen  = 88 + 8*2*8 + 4 // one generation's sketch snapshot
	a92RotSize = 56 + 2*a92RotGen + 4
)

func a92RotInput(t *testing.T) (src, dst *rotator.Rotator, snap []byte) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(a92RotT0)
	mk := func() *rotator.Rotator {
		r, err := rotator.New(rotator.Config{
			Sketch: sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Exponential(0.1), Hi: 1000, Seed: 9, Clock: c},
			Period: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src = mk()
	src.UpdateString("a", 30)
	src.UpdateString("b", 4)
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != a92RotSize {
		t.Fatalf("rotator snapshot of %d bytes, docs/snapshots.md says %d", len(snap), a92RotSize)
	}
	dst = mk()
	dst.UpdateString("z", 99)
	return src, dst, snap
}

// a92FixRotCRCs repairs every generation's checksum and the outer one.
func a92FixRotCRCs(b []byte) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	for i := range 2 {
		lo, hi := 56+i*a92RotGen, 56+(i+1)*a92RotGen
		binary.LittleEndian.PutUint32(b[hi-4:], crc32.Checksum(b[lo:hi-4], tab))
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], tab))
}

// TestAudit92SnapRotatorEveryTruncation: every prefix is refused by both
// decoders with an error matching ErrCorruptSnapshot and
// io.ErrUnexpectedEOF, and the rotator keeps its own state (its key
// reads 99, the snapshot's keys 0).
func TestAudit92SnapRotatorEveryTruncation(t *testing.T) {
	_, _, snap := a92RotInput(t)
	for n := range len(snap) {
		for _, stream := range []bool{false, true} {
			_, dst, _ := a92RotInput(t)
			var err error
			if stream {
				var m int64
				m, err = dst.ReadFrom(bytes.NewReader(snap[:n]))
				if m != int64(n) {
					t.Fatalf("ReadFrom of %d bytes reports %d read", n, m)
				}
			} else {
				err = dst.UnmarshalBinary(snap[:n])
			}
			if !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("stream=%v, %d of %d bytes: %v, want ErrCorruptSnapshot wrapping io.ErrUnexpectedEOF", stream, n, len(snap), err)
			}
			if g, a := dst.QueryString("z"), dst.QueryString("a"); g != 99 || a != 0 {
				t.Fatalf("stream=%v, %d bytes refused: the rotator reads z=%v a=%v, want 99 and 0 (unchanged)", stream, n, g, a)
			}
		}
	}
}

// TestAudit92SnapRotatorOddReaders: one byte at a time, half reads, and
// a trailer after the snapshot: ReadFrom restores the source's state,
// reads exactly the snapshot's bytes and leaves the trailer;
// UnmarshalBinary refuses the trailing bytes (ErrCorruptSnapshot) and
// changes nothing; a reader failing in a generation's cells gives its
// own error and changes nothing.
func TestAudit92SnapRotatorOddReaders(t *testing.T) {
	src, _, snap := a92RotInput(t)
	trailer := []byte("tail")
	for name, wrap := range map[string]func(io.Reader) io.Reader{"one-byte": iotest.OneByteReader, "half": iotest.HalfReader} {
		_, dst, _ := a92RotInput(t)
		rest := bytes.NewReader(append(append([]byte(nil), snap...), trailer...))
		n, err := dst.ReadFrom(wrap(rest))
		if err != nil || n != int64(len(snap)) {
			t.Fatalf("%s: ReadFrom = %d, %v; want %d, nil", name, n, err, len(snap))
		}
		if left, _ := io.ReadAll(rest); !bytes.Equal(left, trailer) {
			t.Fatalf("%s: the stream holds %q after ReadFrom, want %q", name, left, trailer)
		}
		for _, k := range []string{"a", "b", "z"} {
			if g, w := dst.QueryString(k), src.QueryString(k); g != w {
				t.Fatalf("%s: %s reads %v restored, %v in the source", name, k, g, w)
			}
		}
	}
	_, dst, _ := a92RotInput(t)
	if err := dst.UnmarshalBinary(append(append([]byte(nil), snap...), trailer...)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("UnmarshalBinary with trailing bytes: %v, want ErrCorruptSnapshot", err)
	}
	if g := dst.QueryString("z"); g != 99 {
		t.Fatalf("refused trailing bytes, but z reads %v", g)
	}
	boom := errors.New("read failed")
	for _, cut := range []int{30, 56 + 100, 56 + a92RotGen + 150, len(snap) - 2} {
		_, dst, _ := a92RotInput(t)
		_, err := dst.ReadFrom(io.MultiReader(bytes.NewReader(snap[:cut]), iotest.ErrReader(boom)))
		if !errors.Is(err, boom) {
			t.Fatalf("reader failing after %d bytes: %v, want its error", cut, err)
		}
		if g, a := dst.QueryString("z"), dst.QueryString("a"); g != 99 || a != 0 {
			t.Fatalf("reader failing after %d bytes: z=%v a=%v, want 99 and 0 (unchanged)", cut, g, a)
		}
	}
}

// TestAudit92SnapRotatorEveryBitFlip: one bit of every byte flipped (bit
// i mod 8 of byte i, so every bit position is met across the header).
// Checksums stale: refused (ErrCorruptSnapshot), unchanged. Checksums
// repaired: accepted or refused with ErrCorruptSnapshot or
// ErrSnapshotMismatch, never a panic, unchanged when refused, and every
// read within [Lo, Hi] when accepted.
func TestAudit92SnapRotatorEveryBitFlip(t *testing.T) {
	_, _, snap := a92RotInput(t)
	for i := range snap {
		{
			bit := i % 8
			b := append([]byte(nil), snap...)
			b[i] ^= 1 << bit
			for _, repaired := range []bool{false, true} {
				if repaired {
					a92FixRotCRCs(b)
				}
				_, dst, _ := a92RotInput(t)
				err := dst.UnmarshalBinary(b)
				switch {
				case err == nil && !repaired:
					t.Fatalf("byte %d bit %d flipped, checksums stale: accepted", i, bit)
				case err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch):
					t.Fatalf("byte %d bit %d (repaired %v): untyped error %v", i, bit, repaired, err)
				case err != nil:
					if g := dst.QueryString("z"); g != 99 {
						t.Fatalf("byte %d bit %d (repaired %v): refused (%v) but z reads %v", i, bit, repaired, err, g)
					}
				}
				for _, k := range []string{"a", "b", "z"} {
					if g := dst.QueryString(k); !(g >= 0 && g <= 1000) {
						t.Fatalf("byte %d bit %d: %s reads %v, outside [0, 1000]", i, bit, k, g)
					}
				}
			}
		}
	}
}
