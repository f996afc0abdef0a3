package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// gateHashers is a HasherFactory whose i-th built Hasher (generations are
// built in creation order) can be armed to block once, inside a hash
// call, until released: a deterministic way to pause an operation between
// two generations.
type gateHashers struct {
	built   atomic.Int64
	armed   atomic.Int64 // index of the hasher to block once; -1 none
	blocked chan struct{}
	release chan struct{}
}

func newGateHashers() *gateHashers {
	g := &gateHashers{blocked: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(-1)
	return g
}

func (g *gateHashers) factory(seed uint64) grudge.Hasher {
	return gateHasher{g: g, idx: g.built.Add(1) - 1, seed: seed}
}

type gateHasher struct {
	g    *gateHashers
	idx  int64
	seed uint64
}

func (h gateHasher) Hash64(key []byte) uint64 {
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

// TestAuditRotatorTryUpdateExactAcrossTick: Rotator.TryUpdate promises to
// apply delta "only if the primary's aggregate + delta <= limit, exactly
// across concurrent callers and rotations". Two calls TryUpdate(k, 1, 2)
// on an empty key must both be admitted, whatever a rotation does in
// between (with 3 generations the new primary has seen every write). Here
// call 1 is admitted by the primary A and paused after its add reached B;
// a tick promotes B; call 2 is admitted by B (1 + 1 <= 2); call 1 then
// finds the set replaced, rolls back, cannot take its add back out of B
// (written since, a millisecond later), and decides again against its own
// leftover increment: denied. One admission, a score of 2.
func TestAuditRotatorTryUpdateExactAcrossTick(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	ft := grudgetest.NewFakeTicker()
	gh := newGateHashers()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Lo: 0, Hi: 1e9, CellsPerLevel: 1024, Hasher: gh.factory, Clock: clk},
		Generations: 3, Ticker: ft,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := gh.built.Load(); n != 3 {
		t.Fatalf("%d hashers built for 3 generations", n)
	}
	k := []byte("k")
	gh.armed.Store(2) // the third generation (C): call 1 pauses after A and B
	var ok1 bool
	var wg sync.WaitGroup
	wg.Go(func() { ok1 = r.TryUpdate(k, 1, 2) })
	<-gh.blocked
	// The tick ([A B C] -> [B C D]) waits for call 1, which holds its
	// stripe of A until its increment is in every generation; call 2
	// races both. Call 1 is released while they wait.
	wg.Go(func() { ft.Tick() })
	time.Sleep(20 * time.Millisecond)
	clk.Advance(time.Millisecond)
	var ok2 bool
	wg.Go(func() { ok2 = r.TryUpdate(k, 1, 2) })
	time.Sleep(20 * time.Millisecond)
	close(gh.release)
	wg.Wait()
	if r.Rotations() != 1 {
		t.Fatalf("Rotations() = %d after one Tick", r.Rotations())
	}
	admitted := 0
	for _, ok := range []bool{ok1, ok2} {
		if ok {
			admitted++
		}
	}
	if admitted != 2 || r.Query(k) != float64(admitted) {
		t.Fatalf("two racing TryUpdate(k, 1, 2) across a rotation: call 1 %v, call 2 %v; primary scores %v; want both admitted and a score of 2",
			ok1, ok2, r.Query(k))
	}
}
