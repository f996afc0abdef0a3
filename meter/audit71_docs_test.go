package meter

import (
	"math"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// rate.go: "an event and a read are each taken at the millisecond they
// fall in, so the decay between them may count up to 1 ms more than
// elapsed (a factor down to exp(-1 ms/window): 0.999 for a 1 s window,
// 0.37 for 1 ms)". The factor is at least exp(-(elapsed+1ms)/window)
// (float32 rounds up), and the extremes are reached.
func TestAudit71RateWholeMsFactor(t *testing.T) {
	for _, w := range []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second} {
		worst := 1.0
		for _, off := range []time.Duration{0, 1, 500 * time.Microsecond, 999999} {
			for _, d := range []time.Duration{0, 1, 1000, 999999, time.Millisecond, 3 * time.Millisecond / 2} {
				ac := sketchtest.NewFakeClock()
				t0 := a71Base.Add(off)
				ac.SetTime(t0)
				r, err := NewRate(w, WithSize(4, 1<<10), WithSeed(3), WithClock(ac))
				if err != nil {
					t.Fatal(err)
				}
				r.ObserveAt(t0, "k", 1000)
				t1 := t0.Add(d)
				ac.SetTime(t1)
				got := r.PerSecondAt(t1, "k") * w.Seconds() / 1000
				exact := math.Exp(-d.Seconds() / w.Seconds())
				lo := math.Exp(-(d + time.Millisecond).Seconds() / w.Seconds())
				if got < lo*(1-1e-6) {
					t.Errorf("w=%v off=%v d=%v: factor %v below exp(-(d+1ms)/w) = %v", w, off, d, got, lo)
				}
				worst = min(worst, got/exact)
			}
		}
		if want := math.Exp(-float64(time.Millisecond) / float64(w)); worst > want*1.001 {
			t.Logf("w=%v: worst factor %v, doc's extreme %v", w, worst, want)
		}
	}
}

// TestAudit71FixedMeterNoSizes (fixed in the docs, stop 47: the
// sentence no longer names Sizes). meter.go, WithMaxBytes, said: "each
// sketch also allocates three cache-line guard lines (192 bytes on
// amd64, 384 on arm64), which Sizes().Cells includes". No meter type has
// a Sizes method: the sentence pointed to a figure a meter user cannot
// read.
func TestAudit71FixedMeterNoSizes(t *testing.T) {
	src, err := os.ReadFile("meter.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{&Rate{}, &Novelty{}, &Inflight{}} {
		if _, ok := reflect.TypeOf(v).MethodByName("Sizes"); !ok && strings.Contains(string(src), "Sizes().Cells") {
			t.Errorf("%T has no Sizes method; meter/meter.go names Sizes().Cells", v)
		}
	}
}

// WithMaxBytes caps the cell rows of all the meter's sketches (Rate and
// Novelty two generations, Inflight one), guard lines not counted.
func TestAudit71MeterMaxBytesRows(t *testing.T) {
	line := 64
	if runtime.GOARCH == "arm64" {
		line = 128
	}
	per := line / 8
	for _, c := range []struct{ L, M uint32 }{{2, 64}, {4, 100}, {1, 8}} {
		rows := int64(c.L) * int64((int(c.M)+per-1)/per*per) * 8
		for _, k := range []struct {
			name string
			gens int64
			mk   func(max int64) error
		}{
			{"Rate", 2, func(m int64) error { _, err := NewRate(time.Second, WithSize(c.L, c.M), WithMaxBytes(m)); return err }},
			{"Novelty", 2, func(m int64) error {
				_, err := NewNovelty(time.Second, WithSize(c.L, c.M), WithMaxBytes(m))
				return err
			}},
			{"Inflight", 1, func(m int64) error { _, err := NewInflight(10, WithSize(c.L, c.M), WithMaxBytes(m)); return err }},
		} {
			if err := k.mk(k.gens * rows); err != nil {
				t.Errorf("%s %+v: WithMaxBytes(%d x rows %d): %v, want accepted", k.name, c, k.gens, rows, err)
			}
			if err := k.mk(k.gens*rows - 1); err == nil {
				t.Errorf("%s %+v: WithMaxBytes(%d x rows - 1) accepted, want refused", k.name, c, k.gens)
			}
		}
	}
}
