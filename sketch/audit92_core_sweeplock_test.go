package sketch_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a92coreGateLaw halves a score per second; once armed, its first call
// blocks until released (a slow or preempted custom law).
type a92coreGateLaw struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (g *a92coreGateLaw) Apply(score float64, dt int64) float64 {
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

// TestAudit92CoreSweepLockWaitsOncePerGap (audit 92): the one place an
// operation of the lock-free sketch waits for another. Audit 92 found
// sketch.go ("no method takes a lock"), doc.go ("No locks") and
// design.md ("Query ... never wait[s] for anything") contradicting
// design.md's stamp horizon: after a gap past 2^31 ms the first
// operation re-bases every cell under the sweep lock
// (internal/core/horizon.go, maintainSlow), and a Query of an unrelated
// key made meanwhile waits for it. The docs now state that exception;
// this test asserts it as documented: while the first operation is held
// inside the re-base (a custom law that blocks, as a preempted goroutine
// would), a Query of another key has not returned; once released, both
// return the decayed truth, and the next operations of the same gap
// (the sketch re-based) no longer call into the sweep.
func TestAudit92CoreSweepLockWaitsOncePerGap(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	law := &a92coreGateLaw{reached: make(chan struct{}), release: make(chan struct{})}
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 0, Hi: 100, Decay: law, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("a"), 50)
	s.Update([]byte("b"), 50)
	clk.Advance((1<<31 + 10) * time.Millisecond) // past the horizon: the next operation re-bases every cell
	law.mu.Lock()
	law.armed = true
	law.mu.Unlock()
	first := make(chan float64)
	go func() { first <- s.Query([]byte("a")) }()
	<-law.reached // the first Query holds the sweep lock inside the law
	second := make(chan float64)
	go func() { second <- s.Query([]byte("b")) }()
	// The sweep lock is held until release: the second Query cannot have
	// returned, however long this waits (no timing is asserted the other
	// way).
	select {
	case v := <-second:
		t.Errorf("Query(b) returned %v while the first operation held the re-base; the docs say it waits", v)
	case <-time.After(50 * time.Millisecond):
	}
	close(law.release)
	if a := <-first; a != 0 {
		t.Errorf("Query(a) after 2^31 ms at half-life 1 s = %v; want 0", a)
	}
	select {
	case b := <-second:
		if b != 0 {
			t.Errorf("Query(b) = %v; want 0", b)
		}
	case <-time.After(time.Minute):
		t.Fatal("Query(b) never returned after the re-base finished")
	}
	// Re-based: later operations of this gap take the fast path.
	s.Update([]byte("a"), 7)
	if got := s.Query([]byte("a")); got < 7 {
		t.Errorf("Query(a) after Update(a, 7) = %v; want >= 7", got)
	}
}
