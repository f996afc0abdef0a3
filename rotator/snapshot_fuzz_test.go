package rotator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FuzzRotatorUnmarshal: arbitrary bytes (and the same bytes with their
// outer checksum fixed) never panic the rotator's decoder, every error is
// a typed snapshot error, and a refused input leaves the rotator as it was.
func FuzzRotatorUnmarshal(f *testing.F) {
	clk := sketchtest.NewFakeClock()
	cfg := Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 100, Clock: clk}, Period: time.Second}
	src := newRotator(f, cfg)
	src.Update([]byte("a"), 3)
	valid, _ := src.MarshalBinary()
	f.Add(valid)
	f.Add(valid[:60])
	f.Add(valid[:len(valid)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		try := func(data []byte) {
			r := newRotator(t, cfg)
			r.Update([]byte("mine"), 7)
			if err := r.UnmarshalBinary(data); err != nil {
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("untyped error: %v", err)
				}
				if r.Query([]byte("mine")) != 7 {
					t.Fatal("refused snapshot changed the rotator")
				}
			}
		}
		try(data)
		if len(data) >= 4 {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed[len(fixed)-4:], core.CRC32C(fixed[:len(fixed)-4]))
			try(fixed)
		}
	})
}
