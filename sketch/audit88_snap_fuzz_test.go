package sketch_test

// Audit 88 (snapshots and merge): the two decoders of a sketch snapshot,
// UnmarshalBinary and ReadFrom, against each other on hostile input.
//
// Contract: Sketch.UnmarshalBinary ("A refused snapshot leaves s as it
// was, except a well-checksummed one holding an invalid score, which
// leaves s reset"), Sketch.ReadFrom ("UnmarshalBinary streaming ... A
// refused header leaves s as it was; an error past the header leaves s
// reset (empty), never half restored"), docs/snapshots.md "What a
// failed restore leaves", sketch/errors.go (every refusal matches
// ErrCorruptSnapshot or ErrSnapshotMismatch).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a88FuzzT0 = 1_770_000_000_000

var a88Castagnoli = crc32.MakeTable(crc32.Castagnoli)

func a88FuzzLaw(which uint8) decay.Decay {
	switch which % 3 {
	case 0:
		return decay.None()
	case 1:
		return decay.Exponential(0.5)
	}
	return decay.Linear(3)
}

func a88FuzzCfg(which uint8, clk sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: a88FuzzLaw(which), Lo: -20, Hi: 50, Seed: 3, Clock: clk}
}

// a88FuzzFill writes a state into s: keys with positive and negative
// scores, at several ages (the clock is moved and put back).
func a88FuzzFill(s *sketch.Sketch, clk *sketchtest.FakeClock, salt int) {
	now := clk.NowMillis()
	for i := range 12 {
		clk.Set(now - int64(300-i*25))
		d := float64((i+salt)%9) + 0.5
		if (i+salt)%4 == 0 {
			d = -3
		}
		s.UpdateString(fmt.Sprint("f", i, "/", salt), d)
	}
	clk.Set(now)
}

// a88Cells returns the cell records of s's snapshot (its header and
// checksum left out: they carry the epoch and instant).
func a88Cells(t *testing.T, s *sketch.Sketch) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b[88 : len(b)-4]
}

func a88FixCRC(b []byte) {
	if len(b) >= 4 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], a88Castagnoli))
	}
}

// FuzzAudit88SnapSketchDecoders: for any input (and the same input with
// its trailing checksum repaired, so mutated cells and header fields get
// past it), on a receiver that already holds a state (so "unchanged" and
// "reset" can be told apart):
//   - every error matches ErrCorruptSnapshot or ErrSnapshotMismatch;
//   - UnmarshalBinary refused: the receiver is unchanged, or reset only
//     when the input is exactly SnapshotSize bytes with a valid checksum
//     (the invalid-score case);
//   - ReadFrom refused: unchanged or reset, never anything else;
//   - UnmarshalBinary accepted implies ReadFrom accepted with the same
//     cells; ReadFrom accepted on an input of exactly SnapshotSize bytes
//     implies UnmarshalBinary accepted;
//   - an accepted restore reads every key within [Lo, Hi] and snapshots
//     again, and that snapshot restores into a third sketch that reads at
//     or above it, and the same once every stamp is past.
func FuzzAudit88SnapSketchDecoders(f *testing.F) {
	for w := range uint8(3) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a88FuzzT0)
		s, err := sketch.New(a88FuzzCfg(w, clk))
		if err != nil {
			f.Fatal(err)
		}
		a88FuzzFill(s, clk, 0)
		snap, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(snap, w, false)
		f.Add(snap, w, true)
		f.Add(snap[:len(snap)-5], w, false)
		f.Add(append(bytes.Clone(snap), 0), w, false)
		flip := bytes.Clone(snap)
		flip[90] ^= 0x40 // a score's exponent
		f.Add(flip, w, true)
		big := bytes.Clone(snap)
		binary.LittleEndian.PutUint32(big[16:], 1<<30) // M
		binary.LittleEndian.PutUint64(big[80:], 2<<30) // cells
		f.Add(big, w, true)
		ver := bytes.Clone(snap)
		ver[4] = 2
		f.Add(ver, w, true)
		nan := bytes.Clone(snap)
		binary.LittleEndian.PutUint32(nan[88+8*5:], math.Float32bits(float32(math.NaN())))
		f.Add(nan, w, true)
		age := bytes.Clone(snap)
		binary.LittleEndian.PutUint32(age[88+8*3+4:], 0x80000000) // most negative age
		f.Add(age, w, true)
		inst := bytes.Clone(snap)
		binary.LittleEndian.PutUint64(inst[72:], 1<<63) // instant at MinInt64
		f.Add(inst, w, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fix bool) {
		if fix {
			data = bytes.Clone(data)
			a88FixCRC(data)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(a88FuzzT0 + 1234)
		cfg := a88FuzzCfg(which, clk)
		mk := func() *sketch.Sketch {
			s, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a88FuzzFill(s, clk, 1)
			return s
		}
		d1, d2 := mk(), mk()
		empty, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		held, none := a88Cells(t, d1), a88Cells(t, empty)
		size := int64(88 + len(held) + 4)

		err1 := d1.UnmarshalBinary(data)
		_, err2 := d2.ReadFrom(bytes.NewReader(data))
		c1, c2 := a88Cells(t, d1), a88Cells(t, d2)
		for i, err := range []error{err1, err2} {
			if err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("decoder %d: untyped error %v", i, err)
			}
		}
		crcOK := len(data) >= 4 && binary.LittleEndian.Uint32(data[len(data)-4:]) == crc32.Checksum(data[:len(data)-4], a88Castagnoli)
		if err1 != nil {
			switch {
			case bytes.Equal(c1, held):
			case bytes.Equal(c1, none) && crcOK && int64(len(data)) == size:
			default:
				t.Fatalf("UnmarshalBinary refused (%v) and left the sketch neither unchanged nor (for a well-checksummed snapshot) reset", err1)
			}
		}
		if err2 != nil && !bytes.Equal(c2, held) && !bytes.Equal(c2, none) {
			t.Fatalf("ReadFrom refused (%v) and left the sketch half restored", err2)
		}
		if err1 == nil {
			if err2 != nil {
				t.Fatalf("UnmarshalBinary accepted, ReadFrom refused: %v", err2)
			}
			if !bytes.Equal(c1, c2) {
				t.Fatalf("UnmarshalBinary and ReadFrom restored different cells")
			}
		}
		if err2 == nil && int64(len(data)) == size && err1 != nil {
			t.Fatalf("ReadFrom accepted a snapshot of exactly SnapshotSize bytes that UnmarshalBinary refused: %v", err1)
		}
		if err1 == nil {
			// The chain: what d1 accepted, its own snapshot restores into
			// d3 reading at or above d1 now (a record stated after the
			// instant is read back to it by the law), and the same (within
			// a float32 ulp, upward) once every stamp is past (5 h: leads
			// are capped at 2^24 ms).
			b, err := d1.MarshalBinary()
			if err != nil {
				t.Fatalf("an accepted restore does not snapshot again on a frozen clock: %v", err)
			}
			d3, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := d3.UnmarshalBinary(b); err != nil {
				t.Fatalf("the restored sketch's own snapshot is refused: %v", err)
			}
			for pass := range 2 {
				for i := range 12 {
					for _, salt := range []int{0, 1} {
						k := fmt.Sprint("f", i, "/", salt)
						v1, v3 := d1.QueryString(k), d3.QueryString(k)
						ulp := float64(math.Nextafter32(float32(math.Abs(v1)), float32(math.Inf(1)))) - math.Abs(v1)
						if v3 < v1 || (pass == 1 && v3-v1 > ulp) {
							t.Fatalf("pass %d: %s reads %v after a second save and restore, %v before", pass, k, v3, v1)
						}
					}
				}
				clk.Set(clk.NowMillis() + 5*3600*1000)
			}
		}
		for _, d := range []*sketch.Sketch{d1, d2} {
			for i := range 12 {
				for _, salt := range []int{0, 1} {
					v := d.QueryString(fmt.Sprint("f", i, "/", salt))
					if math.IsNaN(v) || v < cfg.Lo || v > cfg.Hi {
						t.Fatalf("a key reads %v, outside [Lo, Hi]", v)
					}
				}
			}
			if _, err := d.MarshalBinary(); err != nil {
				t.Fatalf("restored sketch does not snapshot again: %v", err)
			}
		}
	})
}
