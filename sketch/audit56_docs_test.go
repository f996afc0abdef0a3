package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// migrating.md (audits 49-51): "`sketch.Merge(nil)` panicked with a nil
// dereference | a `sketch:` panic".
func TestAudit56MergeNilPanicsSketchPrefix(t *testing.T) {
	s, err := sketch.New(sketch.Config{Hi: 10, Levels: 2, CellsPerLevel: 64, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got any
	func() {
		defer func() { got = recover() }()
		_ = s.Merge(nil)
	}()
	msg := fmt.Sprint(got)
	if got == nil || !strings.HasPrefix(msg, "sketch:") {
		t.Fatalf("Merge(nil) recovered %q, migrating.md: a `sketch:` panic", msg)
	}
	if _, ok := got.(error); ok && strings.Contains(msg, "nil pointer") {
		t.Fatalf("Merge(nil) is a runtime error %q", msg)
	}
}

// snapshots.md: "| 7 | 1 | aggregator | 0 Min, 1 Max, 2 Mean, 255 custom
// (`AggregateFunc`...)", "A sketch snapshot is `88 + 8*L*M + 4` bytes",
// and "a custom `AggregateFunc` ... is only checked to be custom on both
// sides": a custom one restores into another custom one, not into a Min
// (or Max, Mean) sketch, and the other way round.
func TestAudit56AggregatorByteAndCustomCheck(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	mk := func(agg sketch.Aggregator, f func([]float64) float64) *sketch.Sketch {
		s, err := sketch.New(sketch.Config{Hi: 100, Levels: 3, CellsPerLevel: 64, Seed: 7,
			Decay: decay.Linear(1), Clock: clock, Aggregator: agg, AggregateFunc: f})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	maxF := func(xs []float64) float64 {
		m := math.Inf(-1)
		for _, x := range xs {
			m = max(m, x)
		}
		return m
	}
	for _, c := range []struct {
		name string
		agg  sketch.Aggregator
		f    func([]float64) float64
		want byte
	}{{"Min", sketch.Min, nil, 0}, {"Max", sketch.Max, nil, 1}, {"Mean", sketch.Mean, nil, 2},
		{"custom", sketch.Min, maxF, 255}, {"custom over Max", sketch.Max, maxF, 255}} {
		s := mk(c.agg, c.f)
		s.UpdateString("k", 5)
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 88+8*3*64+4 {
			t.Errorf("%s: snapshot is %d bytes, snapshots.md: 88 + 8*L*M + 4 = %d", c.name, len(b), 88+8*3*64+4)
		}
		if b[7] != c.want {
			t.Errorf("%s: aggregator byte %d, snapshots.md: %d", c.name, b[7], c.want)
		}
	}
	custom := mk(sketch.Min, maxF)
	custom.UpdateString("k", 5)
	cb, _ := custom.MarshalBinary()
	if err := mk(sketch.Min, maxF).UnmarshalBinary(cb); err != nil {
		t.Errorf("custom into custom refused: %v", err)
	}
	for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		err := mk(agg, nil).UnmarshalBinary(cb)
		if err == nil || !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("custom snapshot into built-in %v: err %v, want a mismatch", agg, err)
		}
	}
	mb, _ := mk(sketch.Min, nil).MarshalBinary()
	if err := mk(sketch.Min, maxF).UnmarshalBinary(mb); err == nil || !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("Min snapshot into a custom sketch: err %v, want a mismatch", err)
	}
	// "a snapshot written then by a sketch with AggregateFunc now restores
	// only into one without it, with the Aggregator it wrote": a forged
	// old snapshot (byte 7 = 0) restores into Min, not into custom.
	old := append([]byte(nil), cb...)
	old[7] = 0
	fixCRC56(old)
	if err := mk(sketch.Min, nil).UnmarshalBinary(old); err != nil {
		t.Errorf("an older custom snapshot (byte 0) into Min: %v; snapshots.md: it restores into one without AggregateFunc", err)
	}
	if err := mk(sketch.Min, maxF).UnmarshalBinary(old); err == nil {
		t.Errorf("an older custom snapshot (byte 0) restored into a custom sketch; snapshots.md: only into one without it")
	}
	_ = bytes.Equal
	_ = time.Second
}

// fixCRC56 rewrites the trailing CRC-32C (snapshots.md: "CRC-32C
// (Castagnoli) of every byte before it", little-endian).
func fixCRC56(b []byte) {
	c := crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(b[len(b)-4:], c)
}

// docs/snapshots.md's example errors: "sketch: snapshot Seed differs: got
// 9, the sketch has 0" and "sketch: snapshot checksum mismatch: stored
// 0x........, computed 0x........".
func TestAudit56SnapshotErrorTexts(t *testing.T) {
	mk := func(seed uint64) *sketch.Sketch {
		s, err := sketch.New(sketch.Config{Hi: 10, Levels: 2, CellsPerLevel: 64, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b, _ := mk(9).MarshalBinary()
	err := mk(0).UnmarshalBinary(b)
	if err == nil || err.Error() != "sketch: snapshot Seed differs: got 9, the sketch has 0" {
		t.Errorf("seed mismatch error %q, snapshots.md: %q", err, "sketch: snapshot Seed differs: got 9, the sketch has 0")
	}
	b[len(b)-5] ^= 1
	err = mk(9).UnmarshalBinary(b)
	re := regexp.MustCompile(`^sketch: snapshot checksum mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}$`)
	if err == nil || !re.MatchString(err.Error()) || !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("checksum error %q (corrupt %v), snapshots.md: sketch: snapshot checksum mismatch: stored 0x..., computed 0x...", err, errors.Is(err, sketch.ErrCorruptSnapshot))
	}
}
