package sketch_test

// Audit 142: package sketch inside a testing/synctest bubble. The
// default clock (the runtime's nanotime) does not see the bubble's fake
// time; a Clock reading time.Now follows it exactly, through a
// time.Time given to the At forms as well.

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

type a142Clock struct{}

func (a142Clock) NowMillis() int64 { return time.Now().UnixMilli() }
func (a142Clock) Now() time.Time   { return time.Now().Truncate(time.Millisecond) }

func a142Sketch(t *testing.T, c sketch.Clock) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{CellsPerLevel: 1024, Decay: decay.Exponential(1), Hi: 1e9, Clock: c, Seed: 142})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAudit142SketchDefaultClockIgnoresFakeTime: no decay across a fake
// hour on the default clock; an At form given the bubble's time.Now
// (fake, an hour ahead of the clock's reading) is capped at the reading,
// as the doc says of a future t ("a time in the future cannot move the
// sketch ahead of its clock"), so it decays nothing either.
func TestAudit142SketchDefaultClockIgnoresFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := a142Sketch(t, nil)
		s.UpdateString("k", 100)
		time.Sleep(time.Hour)
		// Below 1 only after 4.6 real seconds (a stall), not 105 ms.
		if q := s.QueryString("k"); q < 1 {
			t.Fatalf("decayed to %v over a fake hour on the default clock", q)
		}
		if q := s.QueryAt(time.Now(), "k"); q < 1 {
			t.Fatalf("QueryAt(fake now) decayed to %v", q)
		}
	})
}

// TestAudit142SketchTimeNowClockExactInBubble: on a time.Now clock the
// score decays as exp(-t) in fake seconds, by the short and the At
// forms alike.
func TestAudit142SketchTimeNowClockExactInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := a142Sketch(t, a142Clock{})
		s.UpdateString("k", 100)
		time.Sleep(time.Second)
		want := 100 * math.Exp(-1)
		if q := s.QueryString("k"); math.Abs(q-want) > 1e-4*want {
			t.Fatalf("after a fake second: %v, want %v", q, want)
		}
		time.Sleep(time.Second)
		want = 100 * math.Exp(-2)
		if q := s.QueryAt(time.Now(), "k"); math.Abs(q-want) > 1e-4*want {
			t.Fatalf("QueryAt two fake seconds on: %v, want %v", q, want)
		}
	})
}
