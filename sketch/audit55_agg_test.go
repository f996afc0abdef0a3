package sketch_test

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55CustomAggregatorSnapshotChecked: a sketch with an
// AggregateFunc and one with each built-in (Min, Max, Mean) refuse each
// other's snapshots and Merge (ErrSnapshotMismatch naming Aggregator),
// two custom ones accept; Aggregator(255), the header's custom byte, is
// not accepted as a built-in by New.
func TestAudit55CustomAggregatorSnapshotChecked(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	mk := func(a sketch.Aggregator, f func([]float64) float64) (*sketch.Sketch, error) {
		return sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Seed: 55, Clock: clk, Aggregator: a, AggregateFunc: f})
	}
	must := func(s *sketch.Sketch, err error) *sketch.Sketch {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	custom := func(v []float64) float64 { return v[0] }
	if _, err := mk(255, nil); err == nil {
		t.Fatal("New accepted Aggregator(255), the snapshot header's custom marker, as a built-in")
	}
	c1, c2 := must(mk(sketch.Min, custom)), must(mk(sketch.Max, custom))
	c1.UpdateString("k", 3)
	b, _ := c1.MarshalBinary()
	if err := c2.UnmarshalBinary(b); err != nil {
		t.Fatalf("custom into custom: %v", err)
	}
	for _, a := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		bi := must(mk(a, nil))
		bb, _ := bi.MarshalBinary()
		if err := c1.UnmarshalBinary(bb); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("built-in %v snapshot into custom: %v", a, err)
		}
		if err := bi.UnmarshalBinary(b); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("custom snapshot into built-in %v: %v", a, err)
		}
		if err := bi.Merge(c1); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("Merge custom into built-in %v: %v", a, err)
		}
		if err := c1.Merge(bi); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("Merge built-in %v into custom: %v", a, err)
		}
	}
}
