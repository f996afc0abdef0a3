package rotator_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// hookWriter runs f once, on its n-th Write call, while WriteTo encodes:
// a deterministic "during the encode".
type audit64HookWriter struct {
	bytes.Buffer
	calls, at int
	f         func()
}

func (w *audit64HookWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls == w.at && w.f != nil {
		w.f()
	}
	return w.Buffer.Write(p)
}

func audit64Rot(t *testing.T, clk *sketchtest.FakeClock, period time.Duration) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(1), Hi: 1000, Clock: clk, Seed: 7},
		Period: period,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// migrating.md Stop 46: "`sketch.ErrTakeAgain` (the same value)": a
// refused WriteTo matches it, for a promotion during the encode.
func TestAudit64Stop46ErrTakeAgainPromotion(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := audit64Rot(t, clk, time.Second)
	r.UpdateString("k", 5)
	w := &audit64HookWriter{at: 2, f: func() {
		clk.Advance(time.Second)
		r.UpdateString("k", 1) // lazily promotes
	}}
	_, err := r.WriteTo(w)
	if err == nil {
		t.Fatalf("WriteTo across a promotion succeeded; rotator doc: it fails")
	}
	if !errors.Is(err, sketch.ErrTakeAgain) {
		t.Fatalf("WriteTo error %v does not match sketch.ErrTakeAgain", err)
	}
	// taken again, it succeeds
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatalf("second WriteTo: %v", err)
	}
}

// "a clock jump of over 2^24 ms anywhere after that instant, with a write
// after it, now refuses the snapshot (it was accepted when it came before a
// generation's own instant)": the jump and the write come after the header
// and before the later generation is encoded. Since stop 47 a cell
// written after the instant is read back to it by the law, and only
// one that cannot be stated within 2^24 ms is refused: under Linear(1)
// and Hi 1000 the write of 1 is stated at Hi 999 s before its stamp, so
// the jump is 2^24 ms + 1100 s.
func TestAudit64Stop46ErrTakeAgainJump(t *testing.T) {
	for _, at := range []int{1, 2, 3} {
		clk := sketchtest.NewFakeClock()
		r := audit64Rot(t, clk, 10*time.Hour) // no promotion within the jump
		r.UpdateString("k", 5)
		w := &audit64HookWriter{at: at, f: func() {
			clk.Advance((1<<24 + 1_100_000) * time.Millisecond)
			r.UpdateString("k", 1)
		}}
		_, err := r.WriteTo(w)
		t.Logf("hook at write %d of %d: err %v", at, w.calls, err)
		if at < w.calls && !errors.Is(err, sketch.ErrTakeAgain) {
			t.Fatalf("hook at write %d: a jump of 2^24 ms + 1100 s with a write after it during the encode gave %v; migrating.md Stops 46 and 47: refused (ErrTakeAgain)", at, err)
		}
	}
}

// "... with a write after it, now refuses": a jump alone (no write after it)
// does not refuse the snapshot, and a Query (a read) after the jump does not
// either (Query only reads); the restore at the snapshot instant holds the
// key's score.
func TestAudit64Stop46JumpWithoutWriteAccepted(t *testing.T) {
	for _, read := range []bool{false, true} {
		clk := sketchtest.NewFakeClock()
		r := audit64Rot(t, clk, 10*time.Hour)
		r.UpdateString("k", 5)
		t0 := clk.NowMillis()
		w := &audit64HookWriter{at: 2, f: func() {
			clk.Advance((1<<24 + 10) * time.Millisecond)
			if read {
				r.QueryString("k")
				r.TryUpdateString("k", 1e6, 1) // denied: writes nothing
			}
		}}
		if _, err := r.WriteTo(w); err != nil {
			t.Fatalf("read=%v: a clock jump with no write after it refused the snapshot: %v", read, err)
		}
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(t0)
		r2 := audit64Rot(t, clk2, 10*time.Hour)
		if _, err := r2.ReadFrom(bytes.NewReader(w.Bytes())); err != nil {
			t.Fatal(err)
		}
		if got := r2.QueryString("k"); got < 5 {
			t.Fatalf("read=%v: restored at the snapshot instant: %v, want >= 5", read, got)
		}
	}
}
