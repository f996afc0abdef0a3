package snapshot_test

// Contract conformance (audit11): issue 16's surface: MarshalBinary /
// UnmarshalBinary and WriteTo / ReadFrom on a sketch and a rotator, a
// refused snapshot of another configuration, Merge under the additive law,
// the periodic Saver and a Load that reports a missing or corrupt file.

import (
	"bytes"
	"encoding"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

var (
	_ encoding.BinaryMarshaler   = (*sketch.Sketch)(nil)
	_ encoding.BinaryUnmarshaler = (*sketch.Sketch)(nil)
	_ io.WriterTo                = (*sketch.Sketch)(nil)
	_ io.ReaderFrom              = (*sketch.Sketch)(nil)
	_ encoding.BinaryMarshaler   = (*rotator.Rotator)(nil)
	_ encoding.BinaryUnmarshaler = (*rotator.Rotator)(nil)
	_ io.WriterTo                = (*rotator.Rotator)(nil)
	_ io.ReaderFrom              = (*rotator.Rotator)(nil)

	_ func(string, time.Duration, snapshot.Source, ...snapshot.Option) (*snapshot.Saver, error) = snapshot.NewSaver
	_ func(string, snapshot.Destination) error                                                  = snapshot.Load
)

func TestAudit11APISnapshotRoundTrip(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 512, Hi: 1000, Decay: decay.Exponential(0.1), Seed: 5, Clock: fc}
	a, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		a.UpdateString(string(rune('a'+i%26))+"x", float64(i))
	}
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	for i := range 26 {
		k := string(rune('a'+i)) + "x"
		if a.QueryString(k) != b.QueryString(k) {
			t.Fatalf("%s: %v vs %v after round trip", k, a.QueryString(k), b.QueryString(k))
		}
	}
	// Another configuration is refused with ErrSnapshotMismatch.
	other := cfg
	other.Seed = 6
	c, err := sketch.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UnmarshalBinary(data); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("restore under another Seed: %v, want ErrSnapshotMismatch", err)
	}
	// Corruption is an error.
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xff
	if err := b.UnmarshalBinary(bad); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("corrupt snapshot: %v, want ErrCorruptSnapshot", err)
	}
}

// TestAudit11APIMergeAdditive: "decay both to a common now, then add cell
// by cell": exact for None and Exponential.
func TestAudit11APIMergeAdditive(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 4096, Hi: 1e6, Seed: 9, Clock: fc}
	a, _ := sketch.New(cfg)
	b, _ := sketch.New(cfg)
	a.UpdateString("k", 3)
	b.UpdateString("k", 4)
	if err := a.Merge(b, 0); err != nil {
		t.Fatal(err)
	}
	if q := a.QueryString("k"); q != 7 {
		t.Errorf("merged k = %v, want 7", q)
	}
	diff := cfg
	diff.Levels = 4
	d, _ := sketch.New(diff)
	if err := a.Merge(d, 0); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("merge of another shape: %v, want ErrSnapshotMismatch", err)
	}
}

func TestAudit11APISaverLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.snap")
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 256, Hi: 100}
	s, _ := sketch.New(cfg)
	s.UpdateString("k", 9)
	sv, err := snapshot.NewSaver(path, time.Hour, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil { // saves on Close
		t.Fatal(err)
	}
	r, _ := sketch.New(cfg)
	if err := snapshot.Load(path, r); err != nil {
		t.Fatal(err)
	}
	if q := r.QueryString("k"); q != 9 {
		t.Errorf("loaded k = %v, want 9", q)
	}
	empty, _ := sketch.New(cfg)
	if err := snapshot.Load(filepath.Join(dir, "missing"), empty); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Errorf("missing file: %v, want ErrNoSnapshot", err)
	}
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(path, empty); err == nil {
		t.Error("truncated file loaded without an error")
	}
	if q := empty.QueryString("k"); q != 0 {
		t.Errorf("after a failed load k = %v, want 0 (empty)", q)
	}
}
