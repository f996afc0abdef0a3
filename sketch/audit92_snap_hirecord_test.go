package sketch_test

// Audit 92 finding: Merge loses the later stamp of a cell stated at Hi.
//
// WriteTo records a cell written during the encode whose value read
// back to the snapshot instant T passes Hi "at Hi with the least
// negative age from which Hi decays to v or more by its stamp"
// (docs/snapshots.md, "Consistency under concurrent updates";
// Sketch.restate); a restore on a clock at or before that stamp keeps
// the cell at Hi stamped after now. Merge reads such a cell of other
// (stamped after the merge's instant) back to the instant by the law's
// inverse, which passes Hi, and stores the sum clamped at Hi stamped at
// the merge's instant: the later stamp is lost, and the merged cell
// decays from the instant instead of from the stamp. Merged into an
// empty sketch, the key then reads below the sketch merged in, and
// below the truth of the stream (non-negative deltas), at every later
// time: 6.07 for 10 half a second later under Exponential(1), Hi 10.
//
// Contract: Sketch.Merge (sketch/sketch.go: "adds other into s under the
// additive law, cell by cell ...: exact for the None and Exponential
// laws"); docs/snapshots.md, "Merge": "A positive score is now read back
// to the instant by the law's inverse ...: at or above its value then
// for non-negative deltas, and the union's exactly from its stamp on
// under None and Exponential", and for Linear "Merge never falls below
// either input's truth"; API.md: "Min aggregation never under-estimates:
// Query(k) >= the key's true score ..., whatever the clamps, roll-backs,
// refunds, rotations, clock jumps".

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a92Hook runs f once, at its first Write (the header: before any cell
// is read), so a write lands during the encode deterministically.
type a92Hook struct {
	bytes.Buffer
	f func()
}

func (w *a92Hook) Write(p []byte) (int, error) {
	if w.f != nil {
		f := w.f
		w.f = nil
		f()
	}
	return w.Buffer.Write(p)
}

// TestAudit92SnapMergeFixedHiRecordLosesItsStamp (audit 92; fixed at stop
// 58, the text below says what was wrong): a key is written to
// its clamp (Update 100, Hi 10) 500 ms into an encode that began at T;
// the snapshot is restored on a clock at T (R), and R is merged into an
// empty sketch E on a clock at T. From the write's stamp on, the
// original and R read the truth (10 at T+500 ms, decaying from there);
// E = 0 + R must read at least R (and the truth) at every later time.
func TestAudit92SnapMergeFixedHiRecordLosesItsStamp(t *testing.T) {
	const T = int64(1_800_000_000_000)
	laws := []struct {
		name string
		d    decay.Decay
	}{{"exp", decay.Exponential(1)}, {"linear", decay.Linear(1)}}
	for _, lw := range laws {
		mk := func() (*sketch.Sketch, *sketchtest.FakeClock) {
			c := sketchtest.NewFakeClock()
			c.Set(T)
			return mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 4, Decay: lw.d, Hi: 10, Seed: 2, Clock: c}), c
		}
		orig, co := mk()
		w := &a92Hook{f: func() {
			co.Advance(500 * time.Millisecond)
			orig.UpdateString("k", 100) // clamped at Hi = 10, stamped T+500ms
		}}
		if _, err := orig.WriteTo(w); err != nil {
			t.Fatalf("%s: WriteTo: %v", lw.name, err)
		}
		r, cr := mk()
		if err := r.UnmarshalBinary(w.Bytes()); err != nil {
			t.Fatalf("%s: restore: %v", lw.name, err)
		}
		e, ce := mk()
		if err := e.Merge(r); err != nil {
			t.Fatalf("%s: Merge: %v", lw.name, err)
		}
		for _, dt := range []int64{0, 250, 500, 800, 1500} {
			co.Set(T + dt)
			cr.Set(T + dt)
			ce.Set(T + dt)
			truth := orig.QueryString("k") // the never-saved sketch, from the write's stamp on
			got, in := e.QueryString("k"), r.QueryString("k")
			if got < in {
				t.Errorf("%s at T+%dms: empty.Merge(restored) reads %v, below the restored sketch merged in (%v)", lw.name, dt, got, in)
			}
			if dt >= 500 && got < truth {
				t.Errorf("%s at T+%dms: empty.Merge(restored) reads %v, below the truth %v (the key written to Hi at T+500ms)", lw.name, dt, got, truth)
			}
		}
	}
}
