package rotator

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a65T0 = int64(1_700_000_000_000)

func a65Cfg(c sketch.Clock) Config {
	return Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 1024, Decay: decay.Linear(1), Hi: 1e9, Seed: 65, Clock: c},
		Generations: 3,
		Period:      time.Hour,
	}
}

// TestAudit65FixedRotatorZeroWriteReadBelowTruth (fixed in stop 47: a
// 0 under Linear is read back by the drain): rotator/rotator.go
// WriteTo: "a cell written after it is read back to it by the law";
// docs/snapshots.md: "a score of 0 is 0 at every instant: age 0", and
// migrating.md Stop 47: "never below the truth from T on". A rotator
// (Linear(1), Period 1 h) holds 10 for k at T; during the encode, 20 s
// on, k is updated by 0 (a non-negative delta) in the primary, whose
// cells are not yet loaded (write N <= 2): the cell, drained to 0, is
// re-stamped and recorded as 0 at age 0. Restored on a clock at T, k
// reads 0 where the never-saved rotator read 10 (and 5 at T+5 s).
func TestAudit65FixedRotatorZeroWriteReadBelowTruth(t *testing.T) {
	for _, N := range []int{1, 2} {
		c := sketchtest.NewFakeClock()
		c.Set(a65T0)
		r, err := New(a65Cfg(c))
		if err != nil {
			t.Fatal(err)
		}
		r.UpdateString("k", 10)
		truth := r.QueryString("k")
		w := &testhook.Writer{N: N, Hook: func() {
			c.Set(a65T0 + 20_000)
			r.UpdateString("k", 0)
		}}
		if _, err := r.WriteTo(w); err != nil {
			t.Fatalf("N=%d: WriteTo: %v", N, err)
		}
		rc := sketchtest.NewFakeClock()
		rc.Set(a65T0)
		rr, err := New(a65Cfg(rc))
		if err != nil {
			t.Fatal(err)
		}
		if err := rr.UnmarshalBinary(w.Buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		if got := rr.QueryString("k"); got < truth {
			t.Errorf("N=%d: restored on a clock at T, k reads %v; the never-saved rotator read %v at T (the update completed before WriteTo) "+
				"(snapshots.md: \"a score of 0 is 0 at every instant: age 0\"; migrating.md Stop 47: \"never below the truth from T on\")", N, got, truth)
		}
		rc.Set(a65T0 + 5_000)
		if got := rr.QueryString("k"); got < 5 {
			t.Errorf("N=%d: restored, at T+5 s k reads %v; the truth is 5", N, got)
		}
	}
}

// TestAudit65RotatorPositiveWritesAcrossGenerations: the same rotator,
// k written 2 before T in the primary, then during the encode before
// every write N a positive write (0.5) 3 s on: restored on clocks at T
// and 1 s ahead, k reads at or above its exact Linear truth at T, at
// T+3 s and at T+10 s (the write counted from its instant, whichever
// generation it reached; a write to an already-encoded generation is
// simply not in the snapshot).
func TestAudit65RotatorPositiveWritesAcrossGenerations(t *testing.T) {
	for N := 1; N <= 11; N++ {
		c := sketchtest.NewFakeClock()
		c.Set(a65T0 - 1000)
		r, err := New(a65Cfg(c))
		if err != nil {
			t.Fatal(err)
		}
		r.UpdateString("k", 8)
		c.Set(a65T0)
		w := &testhook.Writer{N: N, Hook: func() {
			c.Set(a65T0 + 3000)
			r.UpdateString("k", 0.5)
		}}
		if _, err := r.WriteTo(w); err != nil {
			t.Fatalf("N=%d: WriteTo: %v", N, err)
		}
		for _, shift := range []int64{0, 1000} {
			rc := sketchtest.NewFakeClock()
			rc.Set(a65T0 + shift)
			rr, err := New(a65Cfg(rc))
			if err != nil {
				t.Fatal(err)
			}
			if err := rr.UnmarshalBinary(w.Buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			for _, d := range []int64{0, 2999, 3000, 10_000} {
				if d < shift {
					continue
				}
				rc.Set(a65T0 + d)
				truth := 8 - float64(1000+d)/1000 // the update before T, drained
				if got := rr.QueryString("k"); got < truth-1e-9 {
					t.Errorf("N=%d restore T%+d: at T%+d k reads %v < truth %v", N, shift, d, got, truth)
				}
			}
		}
	}
}
