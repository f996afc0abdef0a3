package limit_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a93parkedWriter parks its Write number at (1 the first) until
// released, after telling reached; every Write goes to buf. A
// limit.New(10, 20) snapshot takes about 100 Writes on either engine:
// number 50 is inside the engine's cells or lines.
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

// TestAudit93LocksLimitWriteToParkedNeverBlocks: limit/persist.go says
// WriteTo "may run concurrently with every other method and never
// blocks them" (and limit/doc.go, "Consistency: WriteTo runs alongside
// every other method and never blocks them"). On both engines, with the
// snapshot parked mid-encode inside its writer, every deciding and
// reading method of the limiter returns (a minute is only the failure
// bound of a hung test), a second WriteTo included; and the snapshot,
// restored at the same instant, still denies a key that had spent its
// burst before the save began (one-sided).
func TestAudit93LocksLimitWriteToParkedNeverBlocks(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(fmt.Sprint(e), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(50_000)
			mk := func() *limit.Limiter {
				l, err := limit.New(10, 20, limit.WithEngine(e), limit.WithClock(clk), limit.WithSeed(7))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			l := mk()
			for range 20 {
				if !l.Allow("a") {
					t.Fatal("Allow(a) denied within its burst")
				}
			}
			w := &a93parkedWriter{at: 50, reached: make(chan struct{}), release: make(chan struct{})}
			saved := make(chan error, 1)
			go func() { _, err := l.WriteTo(w); saved <- err }()
			<-w.reached
			done := make(chan struct{})
			go func() {
				defer close(done)
				if l.Allow("a") {
					t.Error("Allow(a) admitted past its burst during the save")
				}
				_ = l.Allow("b")
				_ = l.AllowN(clk.Now(), "c", 3)
				_ = l.Decide("d")
				_ = l.Peek("a")
				_ = l.Tokens("b")
				if r := l.Reserve("e"); r.OK() {
					r.Cancel()
				}
				_ = l.Stats()
				var buf bytes.Buffer
				if _, err := l.WriteTo(&buf); err != nil {
					t.Errorf("a concurrent WriteTo = %v", err)
				}
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the limiter's methods did not return within a minute while WriteTo was parked in Write")
			}
			close(w.release)
			if err := <-saved; err != nil {
				t.Fatalf("WriteTo = %v", err)
			}
			back := mk()
			if _, err := back.ReadFrom(&w.buf); err != nil {
				t.Fatal(err)
			}
			if back.Allow("a") {
				t.Error("restored limiter admitted a, whose burst was spent before the save began")
			}
		})
	}
}
