package sketch_test

// Audit 92 (snapshots): damaged, truncated and odd streams.
//
// Contract: ErrCorruptSnapshot ("matched by every error that reports a
// snapshot that is not well formed: ... truncated, trailing bytes, bad
// checksum"), SnapshotError ("Unwrap gives the cause (io.ErrUnexpectedEOF
// for a truncated stream)", internal/core), UnmarshalBinary ("A refused
// snapshot leaves s as it was"), ReadFrom ("reading exactly the
// snapshot's bytes. A refused header leaves s as it was; an error past
// the header leaves s reset (empty), never half restored"). Earlier
// audits fuzzed the decoders (audit 88) and truncated at a few lengths;
// these cut at every length, read through one-byte and data-with-EOF
// readers, and check what the receiver holds after each refusal.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
	"testing/iotest"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a92InputPair(t *testing.T) (src, dst *sketch.Sketch, snap []byte, clk *sketchtest.FakeClock) {
	t.Helper()
	clk = sketchtest.NewFakeClock()
	clk.Set(1_800_000_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Exponential(0.01), Hi: 1000, Seed: 4, Clock: clk}
	src = mustNewSketch(t, cfg)
	src.UpdateString("a", 40)
	src.UpdateString("b", 7)
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dst = mustNewSketch(t, cfg)
	dst.UpdateString("z", 99) // the receiver's own state before a restore
	return src, dst, snap, clk
}

// TestAudit92SnapSketchEveryTruncation: every prefix of a snapshot (0 to
// len-1 bytes) is refused by UnmarshalBinary and ReadFrom with an error
// matching ErrCorruptSnapshot and io.ErrUnexpectedEOF; UnmarshalBinary
// leaves the receiver as it was, ReadFrom too while the header is short,
// and reset (empty: its own key reads 0) once the header was read.
func TestAudit92SnapSketchEveryTruncation(t *testing.T) {
	_, _, snap, _ := a92InputPair(t)
	for n := range len(snap) {
		_, dst, _, _ := a92InputPair(t)
		err := dst.UnmarshalBinary(snap[:n])
		if !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("UnmarshalBinary of %d of %d bytes: %v, want ErrCorruptSnapshot wrapping io.ErrUnexpectedEOF", n, len(snap), err)
		}
		if g := dst.QueryString("z"); g != 99 {
			t.Fatalf("UnmarshalBinary of %d bytes refused, but the receiver's key reads %v, was 99", n, g)
		}
		_, dst, _, _ = a92InputPair(t)
		m, err := dst.ReadFrom(bytes.NewReader(snap[:n]))
		if !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadFrom of %d of %d bytes: %v, want ErrCorruptSnapshot wrapping io.ErrUnexpectedEOF", n, len(snap), err)
		}
		if m != int64(n) {
			t.Fatalf("ReadFrom of %d bytes reports %d read", n, m)
		}
		want := 99.0
		if n >= 88 {
			want = 0 // past the header: reset, never half restored
		}
		if g := dst.QueryString("z"); g != want {
			t.Fatalf("ReadFrom of %d bytes refused: the receiver's key reads %v, want %v", n, g, want)
		}
		if g := dst.QueryString("a"); g != 0 && n >= 88 {
			t.Fatalf("ReadFrom of %d bytes refused: the snapshot's key reads %v in the reset receiver", n, g)
		}
	}
}

// TestAudit92SnapSketchOddReaders: ReadFrom through a reader that hands
// one byte at a time, and through one that returns the last bytes with
// io.EOF (iotest.DataErrReader), restores the same state as
// UnmarshalBinary, reads exactly the snapshot's 88 + 8*L*M + 4 bytes and leaves what
// follows in the stream; a reader failing with its own error mid-cells
// gives that error (errors.Is) and leaves the receiver reset.
func TestAudit92SnapSketchOddReaders(t *testing.T) {
	src, _, snap, _ := a92InputPair(t)
	trailer := []byte("NEXT-RECORD")
	stream := append(append([]byte(nil), snap...), trailer...)
	readers := map[string]func(io.Reader) io.Reader{
		"one-byte": iotest.OneByteReader,
		"data-err": iotest.DataErrReader,
		"half":     iotest.HalfReader,
	}
	for name, wrap := range readers {
		_, dst, _, _ := a92InputPair(t)
		in := stream
		if name == "data-err" {
			in = snap // it reads ahead of what it returns: no trailer to check
		}
		rest := bytes.NewReader(in)
		n, err := dst.ReadFrom(wrap(rest))
		if err != nil {
			t.Fatalf("%s: ReadFrom: %v", name, err)
		}
		if n != int64(len(snap)) || n != 88+8*2*8+4 { // docs/snapshots.md: 88 + 8*L*M + 4
			t.Fatalf("%s: ReadFrom read %d bytes, want the snapshot's %d", name, n, len(snap))
		}
		if left, _ := io.ReadAll(rest); name != "data-err" && !bytes.Equal(left, trailer) {
			t.Fatalf("%s: after ReadFrom the stream holds %q, want %q", name, left, trailer)
		}
		for _, k := range []string{"a", "b", "z"} {
			if g, w := dst.QueryString(k), src.QueryString(k); g != w {
				t.Fatalf("%s: %s reads %v restored, %v in the source", name, k, g, w)
			}
		}
	}
	// Trailing bytes: ReadFrom takes the snapshot, UnmarshalBinary refuses.
	_, dst, _, _ := a92InputPair(t)
	if err := dst.UnmarshalBinary(stream); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("UnmarshalBinary with trailing bytes: %v, want ErrCorruptSnapshot", err)
	}
	if g := dst.QueryString("z"); g != 99 {
		t.Fatalf("a refused UnmarshalBinary changed the receiver: %v", g)
	}
	// A reader failing in the middle of the cells.
	boom := errors.New("disk on fire")
	_, dst, _, _ = a92InputPair(t)
	_, err := dst.ReadFrom(io.MultiReader(bytes.NewReader(snap[:120]), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("ReadFrom through a failing reader: %v, want the reader's error", err)
	}
	if g := dst.QueryString("z"); g != 0 {
		t.Fatalf("ReadFrom failed after the header: the receiver's key reads %v, want 0 (reset)", g)
	}
	// and in the header: unchanged
	_, dst, _, _ = a92InputPair(t)
	_, err = dst.ReadFrom(io.MultiReader(bytes.NewReader(snap[:40]), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("ReadFrom failing in the header: %v, want the reader's error", err)
	}
	if g := dst.QueryString("z"); g != 99 {
		t.Fatalf("ReadFrom failed in the header: the receiver's key reads %v, want 99 (unchanged)", g)
	}
}

// TestAudit92SnapSketchEveryByteFlip: every single-bit flip of every byte
// of a snapshot, checksum left stale: UnmarshalBinary refuses it with an
// error matching ErrCorruptSnapshot (the checksum) and leaves the
// receiver unchanged; with the checksum repaired, a flip is either
// accepted or refused with ErrCorruptSnapshot or ErrSnapshotMismatch,
// never a panic, and an accepted one reads within [Lo, Hi].
func TestAudit92SnapSketchEveryByteFlip(t *testing.T) {
	_, _, snap, _ := a92InputPair(t)
	for i := range snap {
		for bit := range 8 {
			b := append([]byte(nil), snap...)
			b[i] ^= 1 << bit
			_, dst, _, _ := a92InputPair(t)
			if err := dst.UnmarshalBinary(b); !errors.Is(err, sketch.ErrCorruptSnapshot) {
				t.Fatalf("byte %d bit %d flipped: UnmarshalBinary %v, want ErrCorruptSnapshot", i, bit, err)
			}
			if g := dst.QueryString("z"); g != 99 {
				t.Fatalf("byte %d bit %d: refused, but the receiver changed (%v)", i, bit, g)
			}
			if i >= len(snap)-4 {
				continue
			}
			fixCRC56(b)
			err := dst.UnmarshalBinary(b)
			if err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("byte %d bit %d, checksum repaired: untyped error %v", i, bit, err)
			}
			for _, k := range []string{"a", "b", "z"} {
				if g := dst.QueryString(k); !(g >= 0 && g <= 1000) {
					t.Fatalf("byte %d bit %d: %s reads %v, outside [0, 1000]", i, bit, k, g)
				}
			}
		}
	}
}

// TestAudit92SnapSketchInvalidScoreResets: UnmarshalBinary's "A refused
// snapshot leaves s as it was, except a well-checksummed one holding an
// invalid score, which leaves s reset": a valid checksum around a cell
// holding NaN, +Inf, a score above Hi or below Lo is refused
// (ErrCorruptSnapshot) by both decoders, and the receiver is then empty,
// not half restored (its own key and the snapshot's read 0).
func TestAudit92SnapSketchInvalidScoreResets(t *testing.T) {
	_, _, snap, _ := a92InputPair(t)
	for _, cell := range []int{0, 5, 15} {
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1001, -0.5} {
			b := append([]byte(nil), snap...)
			binary.LittleEndian.PutUint32(b[88+8*cell:], math.Float32bits(v))
			fixCRC56(b)
			for _, stream := range []bool{false, true} {
				_, dst, _, _ := a92InputPair(t)
				var err error
				if stream {
					_, err = dst.ReadFrom(bytes.NewReader(b))
				} else {
					err = dst.UnmarshalBinary(b)
				}
				if !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Fatalf("cell %d = %v (stream %v): %v, want ErrCorruptSnapshot", cell, v, stream, err)
				}
				for _, k := range []string{"z", "a", "b"} {
					if g := dst.QueryString(k); g != 0 {
						t.Fatalf("cell %d = %v (stream %v) refused: %s reads %v, want 0 (reset)", cell, v, stream, k, g)
					}
				}
			}
		}
	}
}
