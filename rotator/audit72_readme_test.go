package rotator_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// README.md:71-85: the rotator snippet, on a fake clock.
func TestAudit72READMERotatorSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{
			Decay:  decay.Linear(10),
			Hi:     100,
			Hasher: sketch.SipHash(),
			Seed:   sketch.RandomSeed(),
			Clock:  clk,
		},
		Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < 50; i++ {
		if r.TryUpdateString("192.0.2.1", 1, 20) {
			n++
		}
	}
	if n != 20 {
		t.Errorf("README.md:82: admitted %d at one instant, want 20 (debt within 20)", n)
	}
	clk.Advance(100 * time.Millisecond) // drains 1
	if !r.TryUpdateString("192.0.2.1", 1, 20) || r.TryUpdateString("192.0.2.1", 1, 20) {
		t.Errorf("README.md:74: 100 ms at 10/s should free exactly one")
	}
}

// README.md:69: "a score lives at most Generations x Period"; rotator/doc.go:57.
func TestAudit72READMEForgetting(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{Hi: 100, Clock: clk, Levels: 2, CellsPerLevel: 64},
		Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	r.UpdateString("k", 5)
	clk.Advance(2*time.Minute - 30*time.Second - time.Millisecond)
	if r.QueryString("k") != 5 {
		t.Errorf("lost before Generations x Period")
	}
	clk.Advance(30*time.Second + time.Millisecond) // 2 min after the write
	if got := r.QueryString("k"); got != 0 {
		t.Errorf("README.md:69: score %v still there 2 x Period after the write", got)
	}
}

// README.md:11 "Query only reads": a Query leaves the snapshot unchanged.
func TestAudit72QueryOnlyReads(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s, _ := sketch.New(sketch.Config{Hi: 100, Clock: clk, Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(1)})
	s.UpdateString("k", 50)
	clk.Advance(3 * time.Second)
	a, _ := s.MarshalBinary()
	for i := 0; i < 10; i++ {
		s.QueryString("k")
		s.TryUpdateString("k", 100, 10) // denied: also read-only
	}
	b, _ := s.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Errorf("README.md:11: Query or a denied TryUpdate changed the sketch's state")
	}
}
