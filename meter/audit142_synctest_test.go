package meter_test

// Audit 142: meter inside a testing/synctest bubble. The default clock
// (the runtime's nanotime) does not see the bubble's fake time; a clock
// reading time.Now (WithClock) follows it exactly. Nothing here starts a
// goroutine or a timer, so a bubble ends cleanly (synctest.Test panics
// on anything left blocked in it).

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/meter"
)

type a142Clock struct{}

func (a142Clock) NowMillis() int64 { return time.Now().UnixMilli() }
func (a142Clock) Now() time.Time   { return time.Now().Truncate(time.Millisecond) }

// TestAudit142MeterDefaultClockIgnoresFakeTime: with the default clock a
// fake hour in the bubble decays nothing: Rate keeps its count and
// Novelty still remembers a key (real time moved microseconds).
func TestAudit142MeterDefaultClockIgnoresFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := meter.NewRate(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		n, err := meter.NewNovelty(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			r.Observe("k")
		}
		n.Seen("k")
		before := r.PerSecond("k")
		time.Sleep(time.Hour)
		// Below 1% only after 4.6 real seconds (a stall), not 105 ms.
		if after := r.PerSecond("k"); after < before*0.01 {
			t.Fatalf("Rate decayed over a fake hour on the default clock: %v -> %v", before, after)
		}
		if !n.Contains("k") {
			t.Fatal("Novelty forgot a key over a fake hour on the default clock")
		}
	})
}

// a142MeterScript returns a transcript of Rate and Novelty readings on a
// time.Now clock across fake sleeps and rotations.
func a142MeterScript(t *testing.T) []string {
	var out []string
	synctest.Test(t, func(t *testing.T) {
		r, err := meter.NewRate(time.Second, meter.WithClock(a142Clock{}), meter.WithSeed(142))
		if err != nil {
			t.Fatal(err)
		}
		n, err := meter.NewNovelty(time.Second, meter.WithClock(a142Clock{}), meter.WithSeed(142))
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			r.Observe("k")
		}
		out = append(out, fmt.Sprintf("seen %v %v", n.Seen("k"), n.Seen("k")))
		for _, d := range []time.Duration{time.Second, time.Second, 30 * time.Second, time.Hour} {
			time.Sleep(d)
			out = append(out, fmt.Sprintf("%v rate %.4f contains %v", d, r.PerSecond("k"), n.Contains("k")))
		}
	})
	return out
}

// TestAudit142MeterTimeNowClockExactInBubble: on a time.Now clock the
// meters follow the bubble's fake time: Rate decays as exp(-t/window)
// (100/s, then 36.79, 13.53), Novelty forgets after its T, rotation
// over 16 windows happens, and two runs give the same transcript.
func TestAudit142MeterTimeNowClockExactInBubble(t *testing.T) {
	a, b := a142MeterScript(t), a142MeterScript(t)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ: %q vs %q", a, b)
	}
	want := []string{
		"seen false true",
		fmt.Sprintf("1s rate %.4f contains false", 100*math.Exp(-1)),
		fmt.Sprintf("1s rate %.4f contains false", 100*math.Exp(-2)),
		"30s rate 0.0000 contains false",
		"1h0m0s rate 0.0000 contains false",
	}
	if len(a) != len(want) {
		t.Fatalf("transcript %q", a)
	}
	for i := range want {
		if a[i] != want[i] {
			var x, y float64
			var d1, d2 string
			// Rate rounds up in float32: accept 1e-4 relative.
			if _, err := fmt.Sscanf(a[i], "%s rate %f", &d1, &x); err == nil {
				if _, err := fmt.Sscanf(want[i], "%s rate %f", &d2, &y); err == nil && d1 == d2 && math.Abs(x-y) <= 1e-4*y+1e-4 {
					continue
				}
			}
			t.Errorf("step %d: %q, want %q", i, a[i], want[i])
		}
	}
}
