package sketch_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A snapshot taken in one process restores in another, on its own clock:
// each score ages by the downtime, here 10 s of a 1/s leak.
func ExampleSketch_UnmarshalBinary() {
	before := sketchtest.NewFakeClock()
	before.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	cfg := sketch.Config{Hi: 1e6, Decay: decay.Linear(1), Clock: before}
	s, _ := sketch.New(cfg)
	s.UpdateString("alice", 50)
	data, _ := s.MarshalBinary()

	after := sketchtest.NewFakeClock() // the restarted process
	after.SetTime(before.Now().Add(10 * time.Second))
	cfg.Clock = after
	r, _ := sketch.New(cfg)
	if err := r.UnmarshalBinary(data); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.QueryString("alice"))

	cfg.Seed = 1 // another configuration: refused, naming the field
	other, _ := sketch.New(cfg)
	err := other.UnmarshalBinary(data)
	fmt.Println(errors.Is(err, sketch.ErrSnapshotMismatch), err)
	// Output:
	// 40
	// true sketch: snapshot Seed differs: got 0, the sketch has 1
}

// Two replicas that each saw part of a stream converge by merging; under
// exponential decay (or none) the merge is exact.
func ExampleSketch_Merge() {
	clock := sketchtest.NewFakeClock()
	cfg := sketch.Config{Hi: 1e6, Decay: decay.Exponential(0.001), Clock: clock}
	a, _ := sketch.New(cfg)
	b, _ := sketch.New(cfg)
	a.UpdateString("bob", 3)
	b.UpdateString("bob", 4)
	if err := a.Merge(b, 0); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.3f\n", a.QueryString("bob"))
	// Output: 7.000
}
