package limit

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit72Hook runs f once, at its at-th Write (1-based).
type audit72Hook struct {
	bytes.Buffer
	f      func()
	at, ws int
}

func (w *audit72Hook) Write(p []byte) (int, error) {
	w.ws++
	if w.f != nil && w.ws >= w.at {
		f := w.f
		w.f = nil
		f()
	}
	return w.Buffer.Write(p)
}

// docs/migrating.md, Stop 47, third row: WriteTo is refused when a cell
// written after a clock jump "can only be recorded more than 2^24 ms after
// T: ... a count-min limiter's debt of 10 with MaxDebt 2000 at 1000/s once
// the jump passes 2^24 ms + about 1.99 s"; a shorter jump is now taken.
// A Period longer than the jump keeps promotions out of it.
func TestAudit72Stop47CountMinJumpBound(t *testing.T) {
	const horizon = time.Duration(1<<24) * time.Millisecond
	for _, c := range []struct {
		extra  time.Duration
		refuse bool
	}{
		{1500 * time.Millisecond, false},
		{1980 * time.Millisecond, false},
		{2100 * time.Millisecond, true},
		{3 * time.Second, true},
	} {
		clk := sketchtest.NewFakeClock()
		l, err := New(1000, 1000, WithEngine(CountMin), WithClock(clk), WithPeriod(100*time.Hour), WithSize(2, 64), WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		if l.MaxDebt() != 2000 {
			t.Fatalf("MaxDebt %v", l.MaxDebt())
		}
		// Write 1 is the limiter's header, written before the rotator
		// takes its instant T; write 2 is the rotator's own.
		w := &audit72Hook{at: 2, f: func() {
			clk.Advance(horizon + c.extra)
			l.AllowN(clk.Now(), "k", 10) // a debt of 10 written after the jump
		}}
		_, err = l.WriteTo(w)
		refused := errors.Is(err, sketch.ErrTakeAgain)
		if err != nil && !refused {
			t.Fatalf("jump 2^24 ms + %v: %v", c.extra, err)
		}
		if refused != c.refuse {
			t.Errorf("migrating.md Stop 47: jump 2^24 ms + %v with a debt of 10 written after it: refused = %v (err %v), want %v", c.extra, refused, err, c.refuse)
		}
	}
}
