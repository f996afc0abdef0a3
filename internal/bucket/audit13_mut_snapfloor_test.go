package bucket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13SnapshotFloorBound: ReadFrom refuses a line "the engine
// could not have written": a floor more than the span (+1) ticks above
// the line's time is corrupt, one at span+1 is accepted. The snapshot is
// a real one with line 0's floor offset rewritten and the CRC-32C
// recomputed, so only the bound decides. Mutation audit13 M31 (span+2)
// accepts the corrupt one.
func TestAudit13SnapshotFloorBound(t *testing.T) {
	law := Linear(10, 40)
	src := newTest(t, 16, law, nil)
	src.Update("k", 3)
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	span := src.Quantum().Span
	le := binary.LittleEndian
	for _, c := range []struct {
		fo      uint64
		corrupt bool
	}{{span + 1, false}, {span + 2, true}, {span + 3, true}} {
		snap := bytes.Clone(buf.Bytes())
		off := snapHeaderBytes // line 0's header word
		h := le.Uint64(snap[off:])
		le.PutUint64(snap[off:], mkHdr(hdrLW(h), c.fo)|h&movingBit)
		n := len(snap)
		le.PutUint32(snap[n-4:], crc32.Update(0, crcTable, snap[:n-4]))
		dst := newTest(t, 16, law, nil)
		_, err := dst.ReadFrom(bytes.NewReader(snap))
		if c.corrupt && !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("floor offset %d (span %d): ReadFrom err %v, want ErrCorruptSnapshot", c.fo, span, err)
		}
		if !c.corrupt && err != nil {
			t.Errorf("floor offset %d (span %d): ReadFrom err %v, want nil", c.fo, span, err)
		}
	}
}

// TestAudit13SnapshotLineAfterInstant: a line whose lw is after the
// snapshot instant cannot have been written by the engine (the instant is
// read after the last line): ReadFrom refuses lw = instant+1 as corrupt
// and takes lw = instant. Mutation audit13 N13 (instant+1 tolerated).
func TestAudit13SnapshotLineAfterInstant(t *testing.T) {
	law := Linear(10, 40)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	src := newTest(t, 16, law, clk)
	clk.Advance(5 * time.Second)
	src.Update("k", 3)
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	n := buf.Len()
	atRel := le.Uint64(buf.Bytes()[n-20:]) // trailer: instant, wall, CRC
	for _, c := range []struct {
		lw      uint64
		corrupt bool
	}{{atRel, false}, {atRel + 1, true}, {atRel + 1000, true}} {
		snap := bytes.Clone(buf.Bytes())
		off := snapHeaderBytes + 5*LineBytes // line 5's header word
		h := le.Uint64(snap[off:])
		le.PutUint64(snap[off:], mkHdr(c.lw, hdrFO(h)))
		le.PutUint32(snap[n-4:], crc32.Update(0, crcTable, snap[:n-4]))
		dst := newTest(t, 16, law, nil)
		_, err := dst.ReadFrom(bytes.NewReader(snap))
		if c.corrupt && !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("lw %d, instant %d: ReadFrom err %v, want ErrCorruptSnapshot", c.lw, atRel, err)
		}
		if !c.corrupt && err != nil {
			t.Errorf("lw %d, instant %d: ReadFrom err %v, want nil", c.lw, atRel, err)
		}
	}
}

// TestAudit13SnapshotEntryWithoutFingerprint: every entry the engine
// writes carries a non-zero fingerprint; ReadFrom refuses a line holding
// a non-empty entry with fingerprint 0 (CRC recomputed, so only that
// check decides), and takes the same entry with a fingerprint.
// Mutation audit13 N14 (check removed).
func TestAudit13SnapshotEntryWithoutFingerprint(t *testing.T) {
	law := Linear(10, 40)
	src := newTest(t, 16, law, nil)
	src.Update("k", 3)
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	n := buf.Len()
	for _, c := range []struct {
		ent     uint32
		corrupt bool
	}{{0x0000_1234, true}, {0x0000_0001, true}, {mkEnt(0x77, 0x1234), false}} {
		if c.corrupt != (entFP(c.ent) == 0) {
			t.Fatalf("setup: entry %#x", c.ent)
		}
		// Find an empty slot in line 3 and put the entry there.
		snap := bytes.Clone(buf.Bytes())
		base := snapHeaderBytes + 3*LineBytes
		placed := false
		for x := 1; x < wordsPerLine && !placed; x++ {
			w := le.Uint64(snap[base+8*x:])
			for sh := uint(0); sh < 64; sh += 32 {
				if uint32(w>>sh) == 0 {
					le.PutUint64(snap[base+8*x:], w|uint64(c.ent)<<sh)
					placed = true
					break
				}
			}
		}
		if !placed {
			t.Fatal("setup: line 3 is full")
		}
		le.PutUint32(snap[n-4:], crc32.Update(0, crcTable, snap[:n-4]))
		dst := newTest(t, 16, law, nil)
		_, err := dst.ReadFrom(bytes.NewReader(snap))
		if c.corrupt && !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("entry %#08x: ReadFrom err %v, want ErrCorruptSnapshot", c.ent, err)
		}
		if !c.corrupt && err != nil {
			t.Errorf("entry %#08x: ReadFrom err %v, want nil", c.ent, err)
		}
	}
}
