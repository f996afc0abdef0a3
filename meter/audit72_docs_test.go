package meter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit72Panic(f func()) (m string) {
	defer func() {
		if r := recover(); r != nil {
			m = "?"
			if s, ok := r.(string); ok {
				m = s
			}
		}
	}()
	f()
	return ""
}

// meter/doc.go:26: "Period 16 windows by default" (read from the
// snapshot header, persist.go: bytes 16..23 are the Period in ms).
func TestAudit72DefaultPeriodWindows(t *testing.T) {
	r, err := NewRate(time.Second, WithSize(2, 64), WithClock(sketchtest.NewFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if p := binary.LittleEndian.Uint64(b.Bytes()[16:]); p != 16000 {
		t.Errorf("meter/doc.go:26: Rate(1s) Period %d ms, want 16 windows = 16000", p)
	}
	n, _ := NewNovelty(100*time.Millisecond, WithSize(2, 64), WithClock(sketchtest.NewFakeClock()))
	b.Reset()
	if _, err := n.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if p := binary.LittleEndian.Uint64(b.Bytes()[16:]); p != 1600 {
		t.Errorf("meter/doc.go:26: Novelty(100ms) Period %d ms, want 1600", p)
	}
}

// meter/doc.go:80-81 and the constructors' errors.
func TestAudit72PanicsAndErrors(t *testing.T) {
	var r Rate
	if m := audit72Panic(func() { r.Observe("k") }); m != "meter: zero Rate; use NewRate" {
		t.Errorf("meter/doc.go:81: zero Rate panics %q", m)
	}
	var n Novelty
	if m := audit72Panic(func() { n.Seen("k") }); m != "meter: zero Novelty; use NewNovelty" {
		t.Errorf("zero Novelty panics %q", m)
	}
	var in Inflight
	if m := audit72Panic(func() { in.Acquire("k") }); m != "meter: zero Inflight; use NewInflight" {
		t.Errorf("zero Inflight panics %q", m)
	}
	_, err := NewRate(time.Second, nil)
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "meter: ") {
		t.Errorf("meter/doc.go:78: NewRate(nil Option): %v", err)
	}
}

// meter/doc.go:95-96: Rate C/window estimates the rate, with a startup
// transient 1-exp(-t/window).
func TestAudit72RateTransient(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, _ := NewRate(time.Second, WithClock(clk), WithSize(2, 1024))
	// 100 events per second for 3 s, 1 per 10 ms.
	for i := 0; i < 300; i++ {
		r.Observe("k")
		clk.Advance(10 * time.Millisecond)
	}
	got := r.PerSecond("k")
	want := 100 * (1 - math.Exp(-3))
	if math.Abs(got-want)/want > 0.02 {
		t.Errorf("meter/doc.go:95: PerSecond after 3 s at 100/s = %.2f, want about %.2f", got, want)
	}
}

// meter/doc.go:101-104: Novelty, seen within T; exactly one "new".
func TestAudit72NoveltyWithin(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	n, _ := NewNovelty(100*time.Millisecond, WithClock(clk), WithSize(2, 1024))
	if n.Seen("k") {
		t.Fatal("first Seen says seen")
	}
	clk.Advance(100 * time.Millisecond)
	if !n.Contains("k") {
		t.Errorf("meter/doc.go:101: forgotten at exactly T")
	}
	clk.Advance(2 * time.Millisecond)
	if n.Contains("k") {
		t.Errorf("meter/doc.go:101: still seen at T + 2 ms")
	}
	// Stop 47: T of 1.5 ms runs over 2 ms: a mark lasts at least 1.5 ms.
	n2, _ := NewNovelty(1500*time.Microsecond, WithClock(clk), WithSize(2, 1024))
	n2.Seen("a")
	clk.Advance(time.Millisecond)
	if !n2.Contains("a") {
		t.Errorf("migrating.md Stop 47: T = 1.5 ms forgot a mark after 1 ms")
	}
}

// TestAudit72FixedInflightHasNoAtForms (fixed in the docs, stop 47:
// meter/doc.go now gives the t forms to Rate and Novelty and says
// Inflight's operations take no time; checked: no At forms, and the doc
// says so). The audit quoted meter/doc.go:106-109: "each operation has
// a short form at the clock's reading and one full form taking t first".
func TestAudit72FixedInflightHasNoAtForms(t *testing.T) {
	typ := reflect.TypeOf(&Inflight{})
	var missing []string
	for _, m := range []string{"Acquire", "TryAcquire", "Count"} {
		if _, ok := typ.MethodByName(m + "At"); !ok {
			missing = append(missing, m+"At")
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 3 || !strings.Contains(string(doc), "Inflight's counts do not decay, so its Acquire,") {
		t.Errorf("*Inflight lacks %v; meter/doc.go should say its operations take no time", missing)
	}
}
