package rotator_test

// Audit 134: a rotator snapshot's generation counter ("next": "creation
// counter of the next generation; generation i was number next-N+i",
// docs/snapshots.md) at the ends of uint64, checksums repaired. Audit 88
// forged next below N; here next near 2^64, where next-N+i and the
// counters of the generations created after the restore would wrap.
// Observed: each generation's own header carries its seed (the engine's
// GenerationSeed of the base seed and its number), so a forged next is
// refused as ErrSnapshotMismatch ("Seed differs"; next below N: corrupt,
// "creation counter 0 is below Generations 3"), and only the true one
// restores; that one keeps working through eight promotions: every key
// finite and within [Lo, Hi], a write read at or above itself for (N-1)
// Periods (rotator.Config: "A score lives at most Generations x Period
// after its last write"), its own snapshot restoring again.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit134RotatorNextAtUint64Ends(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	clk := sketchtest.NewFakeClock()
	clk.SetTime(t0)
	src := a88Rot(t, clk, decay.None(), 3, 8)
	for i := range 10 {
		src.UpdateString(fmt.Sprint("s", i), float64(1+i))
	}
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	gsize := (len(snap) - 56 - 4) / 3
	for _, next := range []uint64{math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 - 2, 1 << 63, 0, binary.LittleEndian.Uint64(snap[16:])} {
		t.Run(fmt.Sprint(next), func(t *testing.T) {
			f := bytes.Clone(snap)
			binary.LittleEndian.PutUint64(f[16:], next)
			a88FixRotCRCs(f, gsize, 3)
			rc := sketchtest.NewFakeClock()
			rc.SetTime(t0.Add(100 * time.Millisecond))
			r := a88Rot(t, rc, decay.None(), 3, 8)
			orig := binary.LittleEndian.Uint64(snap[16:])
			if err := r.UnmarshalBinary(f); err != nil {
				typed := errors.Is(err, sketch.ErrSnapshotMismatch) || errors.Is(err, sketch.ErrCorruptSnapshot)
				if !typed || next == orig {
					t.Fatalf("next %d (true %d): %v", next, orig, err)
				}
				return
			}
			if next != orig {
				t.Fatalf("a forged next %d (true %d) was accepted", next, orig)
			}
			// Restored as the original under its own counter?
			for i := range 10 {
				k := fmt.Sprint("s", i)
				if got, want := r.QueryString(k), src.QueryString(k); got < want {
					t.Errorf("restored %s reads %v, the original %v", k, got, want)
				}
			}
			// Eight promotions (Period 1 s), a write at each.
			for p := range 8 {
				k := fmt.Sprint("w", p)
				r.UpdateString(k, 5)
				for step := range 4 {
					rc.Advance(250 * time.Millisecond)
					v := r.QueryString(k)
					if math.IsNaN(v) || v < -10 || v > 100 {
						t.Fatalf("promotion %d: %s reads %v", p, k, v)
					}
					// Under None a write lives at least (N-1) Periods.
					if step < 3 && v < 5 {
						t.Fatalf("promotion %d step %d: %s reads %v, written 5 under %d ms ago", p, step, k, v, 250*(step+1))
					}
				}
			}
			again, err := r.MarshalBinary()
			if err != nil {
				t.Fatalf("the restored rotator does not snapshot: %v", err)
			}
			r2 := a88Rot(t, rc, decay.None(), 3, 8)
			if err := r2.UnmarshalBinary(again); err != nil {
				t.Fatalf("its snapshot is refused: %v", err)
			}
		})
	}
}
