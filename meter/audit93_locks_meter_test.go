package meter_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a93parkedWriter parks its Write number at (1 the first) until
// released, after telling reached; every Write goes to buf. A Rate's
// snapshot of this size takes 9 Writes: number 5 is inside the
// generations' cells.
type a93parkedWriter struct {
	at      int
	n       int
	reached chan struct{}
	release chan struct{}
	buf     bytes.Buffer
}

func (w *a93parkedWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n == w.at {
		close(w.reached)
		<-w.release
	}
	return w.buf.Write(p)
}

// a93whileParked runs save (a WriteTo into a parked writer) until its
// first Write parks, runs ops on another goroutine and waits for them
// (a minute is only the failure bound of a hung test), then releases the
// writer and checks the save succeeded.
func a93whileParked(t *testing.T, name string, save func(io.Writer) (int64, error), ops func()) {
	t.Helper()
	w := &a93parkedWriter{at: 5, reached: make(chan struct{}), release: make(chan struct{})}
	saved := make(chan error, 1)
	go func() { _, err := save(w); saved <- err }()
	<-w.reached
	done := make(chan struct{})
	go func() { ops(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: the operations did not return within a minute while WriteTo was parked in Write; meter/persist.go says WriteTo \"never blocks them\"", name)
	}
	close(w.release)
	if err := <-saved; err != nil {
		t.Fatalf("%s: WriteTo = %v", name, err)
	}
}

// TestAudit93LocksMeterWriteToParkedNeverBlocks: meter/persist.go says a
// Rate's (and Novelty's) WriteTo "may run concurrently with every other
// method and never blocks them". With the snapshot parked inside its
// writer mid-encode (a slow disk), every method of the same meter returns, and
// the snapshot still restores a state at or above the one it started
// from (the writes made meanwhile may be in it or not).
func TestAudit93LocksMeterWriteToParkedNeverBlocks(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	r, err := meter.NewRate(time.Minute, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	n, err := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(clk.Now(), "a", 30)
	n.Seen("a")
	before := r.PerSecond("a")
	var rateW *a93parkedWriter
	a93whileParked(t, "Rate", func(w io.Writer) (int64, error) {
		rateW = w.(*a93parkedWriter)
		return r.WriteTo(w)
	}, func() {
		r.Observe("b")
		r.ObserveAt(clk.Now(), "a", 1)
		_ = r.PerSecond("b")
		_ = r.PerSecondAt(clk.Now(), "a")
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil { // a second, concurrent save
			t.Errorf("a concurrent Rate.WriteTo = %v", err)
		}
	})
	a93whileParked(t, "Novelty", n.WriteTo, func() {
		if n.Seen("c") {
			t.Error("Seen(c) = true on its first sighting")
		}
		if !n.Contains("a") || !n.ContainsAt(clk.Now(), "c") {
			t.Error("Contains(a) or ContainsAt(c) = false after Seen")
		}
		_ = n.SeenAt(clk.Now(), "d")
	})
	back, err := meter.NewRate(time.Minute, meter.WithClock(clk), meter.WithSize(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.ReadFrom(&rateW.buf); err != nil {
		t.Fatal(err)
	}
	if got := back.PerSecond("a"); got < before {
		t.Errorf("restored PerSecond(a) = %v; want >= %v, its value when the save began", got, before)
	}
}
