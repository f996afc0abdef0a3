package rotator_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// auditGate is a sketch.HasherFactory whose i-th built Hasher (one per
// generation, in creation order) can be armed to block once, inside a hash
// call, until released: it pauses an operation between two generations.
type auditGate struct {
	built   atomic.Int64
	armed   atomic.Int64 // index of the hasher to block once; -1 none
	blocked chan struct{}
	release chan struct{}
}

func newAuditGate() *auditGate {
	g := &auditGate{blocked: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(-1)
	return g
}

func (g *auditGate) factory(seed uint64) sketch.Hasher {
	return auditHasher{g: g, idx: g.built.Add(1) - 1, seed: seed}
}

type auditHasher struct {
	g    *auditGate
	idx  int64
	seed uint64
}

func (h auditHasher) Sum64(key []byte) uint64 {
	if h.g.armed.CompareAndSwap(h.idx, -1) {
		close(h.g.blocked)
		<-h.g.release
	}
	x := 0xcbf29ce484222325 ^ h.seed
	for _, c := range key {
		x = (x ^ uint64(c)) * 0x100000001b3
	}
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	return x ^ x>>31
}

func (h auditHasher) Sum64String(key string) uint64 {
	return h.Sum64(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// TestAuditTryUpdateExactAcrossPromotion: the package promises TryUpdate
// "stays exact across promotions". Two TryUpdate(k, 1, 2) on an empty key
// must both be admitted whatever a promotion does in between (with 3
// generations the promoted one has seen every write). Call 1 is admitted
// by A and paused after its add reached B; the clock crosses the deadline
// and call 2, promoting, is admitted by B (1 + 1 <= 2); call 1 finds the
// set replaced, cannot take its add back out of B (written since, a period
// later), decides again against its own leftover and is denied.
func TestAuditTryUpdateExactAcrossPromotion(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	g := newAuditGate()
	cfg := small(clk)
	cfg.Hasher = g.factory
	r := newRotator(t, rotator.Config{Sketch: cfg, Generations: 3, Period: period})
	if n := g.built.Load(); n != 3 {
		t.Fatalf("%d hashers built for 3 generations", n)
	}
	g.armed.Store(2) // generation C: call 1 pauses after A decided and B was written
	var ok1 bool
	var wg sync.WaitGroup
	wg.Go(func() { ok1 = r.TryUpdateString("k", 1, 2) })
	<-g.blocked
	clk.Advance(period) // the next call promotes [A B C] -> [B C D]
	// Call 2 promotes; the promotion waits for call 1, which holds its
	// stripe of A until its increment is in every generation, so call 2
	// runs in its own goroutine and call 1 is released while it waits.
	var ok2 bool
	wg.Go(func() { ok2 = r.TryUpdateString("k", 1, 2) })
	time.Sleep(20 * time.Millisecond)
	close(g.release)
	wg.Wait()
	if p := r.Stats().Periods; p != 1 {
		t.Fatalf("Periods = %d, want 1", p)
	}
	if !ok1 || !ok2 || r.QueryString("k") != 2 {
		t.Fatalf("two TryUpdate(k, 1, 2) across a promotion: call 1 %v, call 2 %v, primary scores %v; want both admitted, score 2",
			ok1, ok2, r.QueryString("k"))
	}
}
