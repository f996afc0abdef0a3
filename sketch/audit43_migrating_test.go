package sketch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/asm"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// docs/migrating.md, "what moved where": the "now" column's APIs exist with
// the stated signatures and behave as described.
func TestAudit43MigratingNativeTable(t *testing.T) {
	// SuggestLevels(hotKeys, cellsPerLevel, targetP): "SuggestLevels(1000, 100_000, 0.01): 8 levels instead of 1"
	var f func(uint32, uint32, float64) uint32 = sketch.SuggestLevels
	if got := f(1000, 100_000, 0.01); got != 1 {
		t.Errorf("sketch.SuggestLevels(1000, 100_000, 0.01) = %d, migrating.md: 1", got)
	}
	if got := f(0, 100, 0.01); got != 1 {
		t.Errorf("no hot keys: %d, doc: one level", got)
	}
	if f(1000, 0, 0.01) != f(1000, sketch.DefaultCellsPerLevel, 0.01) {
		t.Errorf("cellsPerLevel 0 is not the default")
	}
	if sketch.DefaultLevels != 4 || sketch.DefaultCellsPerLevel != 100_000 || sketch.MaxLevels != 8 || sketch.DefaultMaxBytes != 4<<30 {
		t.Errorf("defaults %d %d %d %d", sketch.DefaultLevels, sketch.DefaultCellsPerLevel, sketch.MaxLevels, sketch.DefaultMaxBytes)
	}
	// Merge(other, overlap...): "Merge(other) is Merge(other, 0); a second overlap panics"
	c := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: decay.Linear(1), Clock: c, Seed: 3}
	a, _ := sketch.New(cfg)
	b, _ := sketch.New(cfg)
	a.UpdateString("k", 5)
	b.UpdateString("k", 7)
	if err := a.Merge(b); err != nil {
		t.Fatalf("Merge(other): %v", err)
	}
	if q := a.QueryString("k"); q != 12 {
		t.Errorf("merged %v, want 12 (additive)", q)
	}
	if m := sketchtest.Panics(func() { _ = a.Merge(b, time.Second, time.Second) }); m == "" {
		t.Errorf("Merge with two overlaps did not panic")
	}
	// "`len(MarshalBinary())` is the snapshot size"
	data, _ := a.MarshalBinary()
	if len(data) != 88+8*2*64+4 {
		t.Errorf("len(MarshalBinary()) = %d", len(data))
	}
	// "`sketch.Decode(data, cfg)` -> `sketch.New(cfg)` then `UnmarshalBinary(data)`"
	d, _ := sketch.New(cfg)
	if err := d.UnmarshalBinary(data); err != nil || d.QueryString("k") != 12 {
		t.Errorf("New then UnmarshalBinary: err %v, k %v", err, d.QueryString("k"))
	}
	// reference.New(cfg) (*reference.Sketch, error) with the string At forms
	var rn func(sketch.Config) (*reference.Sketch, error) = reference.New
	rs, err := rn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs.UpdateAt(c.Now(), "k", 3)
	if q := rs.QueryAt(c.Now(), "k"); q != 3 {
		t.Errorf("reference QueryAt %v", q)
	}
	var sc sketch.Scorer = rs
	_ = sc
	// reference.NewRotator(reference.RotatorConfig) (reference.Rotator, error); Rotator = Scorer + Close
	var rr func(reference.RotatorConfig) (reference.Rotator, error) = reference.NewRotator
	_ = rr
	// "asm keeps Pause and Backoff"
	asm.Pause()
	bo := asm.NewBackoff(1, 4)
	bo.Spin()
	// "errors of a refused snapshot still match ErrCorruptSnapshot / ErrSnapshotMismatch"
	other, _ := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 65, Hi: 100, Decay: decay.Linear(1), Clock: c, Seed: 3})
	if err := other.UnmarshalBinary(data); !errors.Is(err, sketch.ErrSnapshotMismatch) && !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("other M: %v", err)
	}
	// migrating.md: "a cell block above 4 GiB" refused (DefaultMaxBytes: L=8, M=2^26)
	_, err = sketch.New(sketch.Config{Levels: 8, CellsPerLevel: 1<<26 + 8, Hi: 1})
	if !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("8 x (2^26+8) cells accepted: %v", err)
	}
}
