package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestRotatorReadFromAdopt: a rotator built under another seed refuses
// the snapshot with ReadFrom and takes it, seed included, with
// ReadFromAdopt: every key then reads as in the original, through later
// promotions too (the next generations derive from the adopted seed).
func TestRotatorReadFromAdopt(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	mk := func(seed uint64) *core.Rotator {
		r, err := core.NewRotator(core.RotatorConfig{
			Sketch: core.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(1), Hi: 100, Seed: seed, Clock: clk},
			Period: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := mk(1)
	for k := range 50 {
		a.UpdateString(fmt.Sprintf("k%d", k), float64(k%7))
	}
	var snap bytes.Buffer
	if _, err := a.WriteTo(&snap); err != nil {
		t.Fatal(err)
	}
	b := mk(2)
	if _, err := b.ReadFrom(bytes.NewReader(snap.Bytes())); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("ReadFrom under another seed: %v", err)
	}
	if _, err := b.ReadFromAdopt(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b.Config().Sketch.Seed != 1 {
		t.Fatalf("seed %d after adopting 1", b.Config().Sketch.Seed)
	}
	for step := range 5 {
		for k := range 50 {
			key := fmt.Sprintf("k%d", k)
			if qa, qb := a.QueryString(key), b.QueryString(key); qa != qb {
				t.Fatalf("step %d, %s: restored %v, original %v", step, key, qb, qa)
			}
			a.UpdateString(key, 1)
			b.UpdateString(key, 1)
		}
		clk.Advance(700 * time.Millisecond)
	}
}
