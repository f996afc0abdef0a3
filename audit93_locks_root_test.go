package grudge_test

import (
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a93rootGate halves a score per second; once armed, its first call
// with dt > 0 blocks until released (a slow or preempted custom law).
type a93rootGate struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (g *a93rootGate) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	g.mu.Lock()
	hit := g.armed
	g.armed = false
	g.mu.Unlock()
	if hit {
		close(g.reached)
		<-g.release
	}
	return score * math.Exp2(-float64(dt)/1000)
}

func (g *a93rootGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// a93rootReturnsOrLocks waits until done delivers (true) or some
// goroutine is seen parked on a sync.Mutex inside the core's horizon
// sweep (maintainSlow: false). A minute is only the failure bound of a
// hung test; no timing is asserted.
func a93rootReturnsOrLocks(t *testing.T, done <-chan float64) (float64, bool) {
	t.Helper()
	limit := time.After(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		select {
		case v := <-done:
			return v, true
		case <-limit:
			t.Fatal("the call neither returned nor parked on the sweep lock within a minute")
		default:
		}
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "maintainSlow") {
				return 0, false
			}
		}
		runtime.Gosched()
	}
}

// a93rootHold runs q("a") until it is held inside the law, then q("b"),
// and reports whether q("b") returned (rather than parking on the sweep
// lock); both are drained after the release, and must read 0.
func a93rootHold(t *testing.T, law *a93rootGate, q func(string) float64) bool {
	t.Helper()
	law.arm()
	first := make(chan float64, 1)
	go func() { first <- q("a") }()
	<-law.reached
	second := make(chan float64, 1)
	go func() { second <- q("b") }()
	b, returned := a93rootReturnsOrLocks(t, second)
	close(law.release)
	if a := <-first; a != 0 {
		t.Errorf("Query(a) after 2^31 ms at half-life 1 s = %v; want 0", a)
	}
	if !returned {
		b = <-second
	}
	if b != 0 {
		t.Errorf("Query(b) = %v; want 0", b)
	}
	return returned
}

// TestAudit93LocksRootSketchWaitsOnReBase: the root package's
// documentation states the operation as "one CAS per cell, no lock"
// (doc.go's pseudo-code) and never mentions package sketch's exception:
// after 2^31 ms (24.8 days) of sketch time without a sweep, the first
// operation re-bases every cell under the sweep lock and a concurrent
// operation of another key waits. grudge.Sketch accepts a custom Decay,
// so the first operation can be held inside that re-base; a Query of
// another key then parks on sync.Mutex.Lock. Audit 93 found doc.go
// silent on it; doc.go now states the exception, asserted here: Query(b)
// parks, and both read the decayed truth once the re-base is released.
func TestAudit93LocksRootSketchWaitsOnReBase(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_000))
	law := &a93rootGate{reached: make(chan struct{}), release: make(chan struct{})}
	s, err := grudge.New(grudge.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Decay: law, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("a"), 50)
	s.Update([]byte("b"), 50)
	clk.Advance((1<<31 + 10) * time.Millisecond)
	if a93rootHold(t, law, func(k string) float64 { return s.Query([]byte(k)) }) {
		t.Error("grudge.Sketch.Query(b) returned while Query(a) held the re-base after 2^31+10 ms idle; doc.go says operations arriving meanwhile wait")
	}
}

// TestAudit93LocksRootTickerRotatorWaitsOnReBase: a ticker-driven
// grudge.Rotator rotates only on ticks. When ticks stop coming for 2^31
// ms (a stalled or long Ticker), its primary is re-based under the sweep
// lock by the first operation, and a concurrent Query of another key
// waits for it: the exception doc.go now states (audit 93), asserted.
func TestAudit93LocksRootTickerRotatorWaitsOnReBase(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_000))
	law := &a93rootGate{reached: make(chan struct{}), release: make(chan struct{})}
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Decay: law, Clock: clk},
		Ticker: tk,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Update([]byte("a"), 50)
	r.Update([]byte("b"), 50)
	clk.Advance((1<<31 + 10) * time.Millisecond) // no tick: no rotation
	if a93rootHold(t, law, func(k string) float64 { return r.Query([]byte(k)) }) {
		t.Error("grudge.Rotator (Ticker, no tick for 2^31+10 ms): Query(b) returned while Query(a) held the re-base of the primary; doc.go says operations arriving meanwhile wait")
	}
	if n := r.Rotations(); n != 0 {
		t.Errorf("Rotations = %d; want 0 (no tick)", n)
	}
}
