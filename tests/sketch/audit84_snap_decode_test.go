package sketch_test

// Audit 84: the decoders of sketch and rotator snapshots under damaged
// input. Every bit flipped (with the checksum left stale, and with it
// repaired so the decoder gets past it), every truncation, trailing
// bytes, a wrong version or kind: a typed error, never a panic, and the
// receiver either as it was or (sketch ReadFrom past the header) empty,
// never half restored. An accepted forged snapshot must leave a sketch
// whose every cell is finite and within [Lo, Hi] and which snapshots
// again.

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

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var audit84snapCRC = crc32.MakeTable(crc32.Castagnoli)

// audit84snapFixCRC rewrites the trailing CRC-32C of b[lo:hi] (the CRC
// is the last 4 bytes of the range).
func audit84snapFixCRC(b []byte, lo, hi int) {
	binary.LittleEndian.PutUint32(b[hi-4:], crc32.Checksum(b[lo:hi-4], audit84snapCRC))
}

func audit84snapSmallCfg(d decay.Decay, clk sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: d, Lo: -3, Hi: 100, Seed: 11, Clock: clk}
}

// audit84snapSmall builds a small sketch with positive and negative
// scores of several ages and returns it, its clock and its snapshot.
func audit84snapSmall(t testing.TB, d decay.Decay) (*sketch.Sketch, *sketchtest.FakeClock, []byte) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(audit84snapT0)
	s, err := sketch.New(audit84snapSmallCfg(d, clk))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		clk.Advance(time.Duration(i*37) * time.Millisecond)
		delta := float64(i%9) + 0.25
		if i%5 == 0 {
			delta = -1.5
		}
		s.UpdateString(fmt.Sprint("k", i), delta)
	}
	snap, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, snap
}

// audit84snapScores returns every cell's score bits (the clock fixed, a
// snapshot's records are the state).
func audit84snapScores(t testing.TB, s *sketch.Sketch) []uint32 {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatalf("a restored sketch does not snapshot again: %v", err)
	}
	out := make([]uint32, 0, 16)
	for p := 88; p+8 <= len(b)-4; p += 8 {
		out = append(out, binary.LittleEndian.Uint32(b[p:]))
	}
	return out
}

func audit84snapAllZero(c []uint32) bool {
	for _, x := range c {
		if x != 0 && x != 0x80000000 {
			return false
		}
	}
	return true
}

func audit84snapTyped(err error) bool {
	return errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)
}

// audit84snapValid checks an accepted restore: every cell finite, within
// [Lo, Hi] (Lo, Hi as float32), and the sketch snapshots again.
func audit84snapValid(t testing.TB, s *sketch.Sketch, what string) {
	t.Helper()
	for _, bits := range audit84snapScores(t, s) {
		v := float64(math.Float32frombits(bits))
		if math.IsNaN(v) || v < -3 || v > 100 {
			t.Fatalf("%s: accepted, and a cell holds %v", what, v)
		}
	}
	for i := range 30 {
		if q := s.QueryString(fmt.Sprint("k", i)); math.IsNaN(q) || math.IsInf(q, 0) {
			t.Fatalf("%s: accepted, and a key reads %v", what, q)
		}
	}
}

// audit84snapTryBoth restores data into dst by UnmarshalBinary and by
// ReadFrom (from the good state each time) and checks the documented
// outcome. good restores the pre-state. fixed says data's checksum is
// valid.
func audit84snapTryBoth(t *testing.T, dst *sketch.Sketch, good, data []byte, what string) {
	t.Helper()
	if err := dst.UnmarshalBinary(good); err != nil {
		t.Fatal(err)
	}
	pre := audit84snapScores(t, dst)
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%s: UnmarshalBinary panicked: %v", what, p)
			}
		}()
		err = dst.UnmarshalBinary(data)
	}()
	if err != nil {
		if !audit84snapTyped(err) {
			t.Fatalf("%s: UnmarshalBinary: untyped error %v", what, err)
		}
		post := audit84snapScores(t, dst)
		// Unchanged, except a well-checksummed snapshot with an
		// invalid score: reset.
		if !audit84snapSameCells(pre, post) && !audit84snapAllZero(post) {
			t.Fatalf("%s: UnmarshalBinary refused (%v) and left the sketch half restored", what, err)
		}
	} else {
		audit84snapValid(t, dst, what+" (UnmarshalBinary)")
	}

	if err := dst.UnmarshalBinary(good); err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	var n int64
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%s: ReadFrom panicked: %v", what, p)
			}
		}()
		n, err = dst.ReadFrom(r)
	}()
	if n != int64(len(data))-int64(r.Len()) {
		t.Fatalf("%s: ReadFrom reported %d bytes, consumed %d", what, n, int64(len(data))-int64(r.Len()))
	}
	if n > int64(len(good)) {
		t.Fatalf("%s: ReadFrom read %d bytes, past the snapshot's %d", what, n, len(good))
	}
	if err != nil {
		if !audit84snapTyped(err) {
			t.Fatalf("%s: ReadFrom: untyped error %v", what, err)
		}
		post := audit84snapScores(t, dst)
		if !audit84snapSameCells(pre, post) && !audit84snapAllZero(post) {
			t.Fatalf("%s: ReadFrom refused (%v) and left the sketch half restored", what, err)
		}
	} else {
		audit84snapValid(t, dst, what+" (ReadFrom)")
	}
}

// TestAudit84SnapDecodeEveryBitFlip flips every bit of a small sketch
// snapshot, with the checksum stale and with it repaired.
func TestAudit84SnapDecodeEveryBitFlip(t *testing.T) {
	for _, lw := range []audit84snapLaw{{"none", decay.None()}, {"exp", decay.Exponential(0.01)}, {"linear", decay.Linear(0.5)}} {
		t.Run(lw.name, func(t *testing.T) {
			_, clk, snap := audit84snapSmall(t, lw.d)
			clk.Advance(time.Second)
			dst, err := sketch.New(audit84snapSmallCfg(lw.d, clk))
			if err != nil {
				t.Fatal(err)
			}
			for bit := 0; bit < len(snap)*8; bit++ {
				if pos := bit / 8; (lw.name != "exp" || pos >= 88 && pos < len(snap)-4) && bit%8 != pos%8 {
					continue // one bit of each byte, and every header and checksum bit under exp
				}
				data := bytes.Clone(snap)
				data[bit/8] ^= 1 << (bit % 8)
				audit84snapTryBoth(t, dst, snap, data, fmt.Sprintf("bit %d, checksum stale", bit))
				if bit/8 < len(snap)-4 {
					audit84snapFixCRC(data, 0, len(data))
					audit84snapTryBoth(t, dst, snap, data, fmt.Sprintf("bit %d, checksum repaired", bit))
				}
			}
		})
	}
}

// TestAudit84SnapDecodeTruncatedAndOversized: every truncation is a
// corrupt-snapshot error that unwraps to io.ErrUnexpectedEOF; a trailing
// byte is refused by UnmarshalBinary (checksum repaired or not), and
// ReadFrom reads exactly the snapshot's bytes and leaves the rest.
func TestAudit84SnapDecodeTruncatedAndOversized(t *testing.T) {
	_, clk, snap := audit84snapSmall(t, decay.Exponential(0.01))
	dst, _ := sketch.New(audit84snapSmallCfg(decay.Exponential(0.01), clk))
	for n := range len(snap) {
		data := snap[:n]
		if err := dst.UnmarshalBinary(data); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("UnmarshalBinary of %d of %d bytes: %v", n, len(snap), err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(data)); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadFrom of %d of %d bytes: %v", n, len(snap), err)
		}
		audit84snapTryBoth(t, dst, snap, data, fmt.Sprintf("truncated to %d", n))
	}
	for _, extra := range [][]byte{{0}, {1, 2, 3, 4}, make([]byte, 1<<16)} {
		data := append(bytes.Clone(snap), extra...)
		if err := dst.UnmarshalBinary(data); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("%d trailing bytes: UnmarshalBinary = %v", len(extra), err)
		}
		fixed := bytes.Clone(data)
		audit84snapFixCRC(fixed, 0, len(fixed))
		if err := dst.UnmarshalBinary(fixed); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("%d trailing bytes, checksum repaired: UnmarshalBinary = %v", len(extra), err)
		}
		r := bytes.NewReader(data)
		n, err := dst.ReadFrom(r)
		if err != nil || n != int64(len(snap)) || r.Len() != len(extra) {
			t.Fatalf("%d trailing bytes: ReadFrom = %d, %v, left %d", len(extra), n, err, r.Len())
		}
	}
}

// TestAudit84SnapDecodeHeaderForgeries forges header fields with a valid
// checksum: version, kind, magic, reserved bytes, the cell count; each a
// corrupt-snapshot error, the sketch unchanged.
func TestAudit84SnapDecodeHeaderForgeries(t *testing.T) {
	src, clk, snap := audit84snapSmall(t, decay.Exponential(0.01))
	_ = src
	dst, _ := sketch.New(audit84snapSmallCfg(decay.Exponential(0.01), clk))
	forge := []struct {
		name string
		f    func(b []byte)
	}{
		{"version 0", func(b []byte) { b[4] = 0 }},
		{"version 2", func(b []byte) { b[4] = 2 }},
		{"version 255", func(b []byte) { b[4] = 255 }},
		{"kind rotator", func(b []byte) { b[5] = 2 }},
		{"kind limiter", func(b []byte) { b[5] = 4 }},
		{"magic", func(b []byte) { copy(b, "GRDH") }},
		{"reserved 9", func(b []byte) { b[9] = 1 }},
		{"reserved 20", func(b []byte) { b[23] = 0x80 }},
		{"cell count", func(b []byte) { binary.LittleEndian.PutUint64(b[80:], 17) }},
		{"cell count 0", func(b []byte) { binary.LittleEndian.PutUint64(b[80:], 0) }},
	}
	for _, fg := range forge {
		data := bytes.Clone(snap)
		fg.f(data)
		audit84snapFixCRC(data, 0, len(data))
		if err := dst.UnmarshalBinary(snap); err != nil {
			t.Fatal(err)
		}
		pre := audit84snapScores(t, dst)
		if err := dst.UnmarshalBinary(data); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("%s: UnmarshalBinary = %v, want ErrCorruptSnapshot", fg.name, err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(data)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("%s: ReadFrom = %v, want ErrCorruptSnapshot", fg.name, err)
		}
		if post := audit84snapScores(t, dst); !audit84snapSameCells(pre, post) {
			t.Fatalf("%s: a refused header changed the sketch", fg.name)
		}
	}
}

// FuzzAudit84SnapSketchDecode: arbitrary bytes, raw and with the
// checksum repaired, into a small sketch: typed errors, no panic, never
// half restored, and an accepted snapshot leaves valid cells.
func FuzzAudit84SnapSketchDecode(f *testing.F) {
	_, _, snap := audit84snapSmall(f, decay.Exponential(0.01))
	f.Add(snap)
	f.Add(snap[:100])
	f.Add([]byte{})
	f.Add([]byte("GRDG\x01\x01"))
	neg := bytes.Clone(snap)
	binary.LittleEndian.PutUint32(neg[88+4:], uint32(0x80000000)) // age -2^31
	f.Add(neg)
	old := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(old[72:], 1<<63) // instant at the end of int64
	f.Add(old)
	f.Fuzz(func(t *testing.T, data []byte) {
		clk := sketchtest.NewFakeClock()
		clk.Set(audit84snapT0 + 5000)
		dst, err := sketch.New(audit84snapSmallCfg(decay.Exponential(0.01), clk))
		if err != nil {
			t.Fatal(err)
		}
		audit84snapTryBoth(t, dst, snap, data, "raw")
		if len(data) >= 92 {
			fixed := bytes.Clone(data)
			audit84snapFixCRC(fixed, 0, len(fixed))
			audit84snapTryBoth(t, dst, snap, fixed, "checksum repaired")
		}
	})
}

// --- rotator ---

func audit84snapRotCfg(clk sketch.Clock) rotator.Config {
	return rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Exponential(0.01), Lo: -3, Hi: 100, Seed: 21, Clock: clk},
		Generations: 3,
		Period:      time.Second,
	}
}

func audit84snapRotator(t testing.TB) (*rotator.Rotator, *sketchtest.FakeClock, []byte) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(audit84snapT0)
	r, err := rotator.New(audit84snapRotCfg(clk))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		clk.Advance(time.Duration(i*23) * time.Millisecond)
		r.UpdateString(fmt.Sprint("k", i%13), float64(i%7)+0.5)
	}
	snap, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return r, clk, snap
}

// audit84snapRotFix repairs the checksum of the generation holding byte
// pos (if any), then the rotator's.
func audit84snapRotFix(data []byte, pos int) {
	const hdr = 56
	g := 88 + 8*2*8 + 4
	if pos >= hdr && pos < hdr+3*g {
		i := (pos - hdr) / g
		if (pos-hdr)%g < g-4 {
			audit84snapFixCRC(data, hdr+i*g, hdr+(i+1)*g)
		}
	}
	if pos < len(data)-4 {
		audit84snapFixCRC(data, 0, len(data))
	}
}

// TestAudit84SnapRotatorDecodeEveryByteFlip: a rotator is never changed by
// a failed restore (docs/snapshots.md: "A rotator builds new generations
// and publishes them only on success: a failed restore never changes
// it"); an accepted forged one snapshots again and reads finite values.
func TestAudit84SnapRotatorDecodeEveryByteFlip(t *testing.T) {
	_, clk, snap := audit84snapRotator(t)
	clk.Advance(300 * time.Millisecond)
	dst, err := rotator.New(audit84snapRotCfg(clk))
	if err != nil {
		t.Fatal(err)
	}
	// One bit per byte (its index cycling), every byte.
	for pos := range snap {
		bit := pos*8 + pos%8
		for _, fix := range []bool{false, true} {
			if (!fix && pos%3 != 0) || (pos >= 56+88 && pos%2 == 1) {
				continue // a stale checksum: every third byte; cells: every other byte
			}
			data := bytes.Clone(snap)
			data[pos] ^= 1 << (bit % 8)
			if fix {
				audit84snapRotFix(data, pos)
			}
			if err := dst.UnmarshalBinary(snap); err != nil {
				t.Fatal(err)
			}
			pre, err := dst.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			for _, how := range []string{"UnmarshalBinary", "ReadFrom"} {
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("bit %d (fix %v): %s panicked: %v", bit, fix, how, p)
						}
					}()
					if how == "ReadFrom" {
						_, err = dst.ReadFrom(bytes.NewReader(data))
					} else {
						err = dst.UnmarshalBinary(data)
					}
				}()
				if err != nil {
					if !audit84snapTyped(err) {
						t.Fatalf("bit %d (fix %v): %s: untyped error %v", bit, fix, how, err)
					}
					post, err2 := dst.MarshalBinary()
					if err2 != nil || !bytes.Equal(pre, post) {
						t.Fatalf("bit %d (fix %v): %s refused (%v) and changed the rotator (%v)", bit, fix, how, err, err2)
					}
					continue
				}
				if !fix {
					t.Fatalf("bit %d: %s accepted a snapshot with a stale checksum", bit, how)
				}
				for i := range 13 {
					if q := dst.QueryString(fmt.Sprint("k", i)); math.IsNaN(q) || math.IsInf(q, 0) || q < -3 || q > 100 {
						t.Fatalf("bit %d: accepted, k%d reads %v", bit, i, q)
					}
				}
				if _, err := dst.MarshalBinary(); err != nil {
					t.Fatalf("bit %d: accepted, and it does not snapshot again: %v", bit, err)
				}
				// Back to the good state for the next method.
				if err := dst.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				pre, _ = dst.MarshalBinary()
			}
		}
	}
}

// TestAudit84SnapRotatorTruncated: every truncation typed, unwrapping to
// io.ErrUnexpectedEOF, the rotator unchanged.
func TestAudit84SnapRotatorTruncated(t *testing.T) {
	_, clk, snap := audit84snapRotator(t)
	dst, _ := rotator.New(audit84snapRotCfg(clk))
	if err := dst.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	pre, _ := dst.MarshalBinary()
	for n := range len(snap) {
		if err := dst.UnmarshalBinary(snap[:n]); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("UnmarshalBinary of %d of %d bytes: %v", n, len(snap), err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(snap[:n])); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadFrom of %d of %d bytes: %v", n, len(snap), err)
		}
	}
	if post, _ := dst.MarshalBinary(); !bytes.Equal(pre, post) {
		t.Fatal("truncated snapshots changed the rotator")
	}
	data := append(bytes.Clone(snap), 0)
	if err := dst.UnmarshalBinary(data); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("a trailing byte: %v", err)
	}
	r := bytes.NewReader(data)
	if n, err := dst.ReadFrom(r); err != nil || n != int64(len(snap)) || r.Len() != 1 {
		t.Fatalf("a trailing byte: ReadFrom = %d, %v, left %d", n, err, r.Len())
	}
}
