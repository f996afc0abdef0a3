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

// a96Gate is a custom Decay (half-life 1 s) that, once armed, blocks its
// n-th call with dt > 0 until released: a slow or preempted user law.
type a96Gate struct {
	mu      sync.Mutex
	left    int // calls before the one that blocks; 0: disarmed
	reached chan struct{}
	release chan struct{}
}

func newA96Gate() *a96Gate {
	return &a96Gate{reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *a96Gate) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	g.mu.Lock()
	hit := false
	if g.left > 0 {
		g.left--
		hit = g.left == 0
	}
	g.mu.Unlock()
	if hit {
		close(g.reached)
		<-g.release
	}
	return score * math.Exp2(-float64(dt)/1000)
}

func (g *a96Gate) arm(n int) {
	g.mu.Lock()
	g.left = n
	g.mu.Unlock()
}

// a96ReturnsOrWaits polls until done is closed (true) or a goroutine is
// seen spinning (asm.Backoff.Spin) inside a frame named in (false): the
// wait for another operation. A minute only bounds a hung test; no timing
// is asserted.
func a96ReturnsOrWaits(t *testing.T, done <-chan struct{}, in string) bool {
	t.Helper()
	limit := time.After(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-done:
			return true
		case <-limit:
			t.Fatal("the call neither returned nor was seen waiting within a minute")
		default:
		}
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, in) && strings.Contains(g, "(*Backoff).Spin") {
				return false
			}
		}
		runtime.Gosched()
	}
}

// a96Factory is a HasherFactory (Murmur3 underneath) that, once armed,
// blocks its next call until released: a slow build of a generation (a
// large one takes that long by itself, allocating its cells).
type a96Factory struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (f *a96Factory) factory(seed uint64) grudge.Hasher {
	f.mu.Lock()
	hit := f.armed
	f.armed = false
	f.mu.Unlock()
	if hit {
		close(f.reached)
		<-f.release
	}
	return grudge.Murmur3()(seed)
}

// TestAudit96RootLocksDocumentedRotatorTryUpdateWaitsOnStripe (audit 96; documented at stop 59,
// the text below says what was wrong; doc.go now states the wait, and the
// test asserts it): doc.go says
// "No method takes a lock, except package sketch's one exception: after
// 2^31 ms (24.8 days) of a sketch's time without a sweep ...". A root
// Rotator's admitted TryUpdate holds its stripe of the primary while it
// writes the younger generations (internal/core/rotator.go, addYounger),
// which runs the user's Decay; a second TryUpdate of the same key waits
// (spins) until the first releases it. Here the first is held inside the
// law at its first younger-generation cell, one millisecond after the
// key was written (no idle, no re-base): the second does not return, it
// is seen spinning in tryHold. Package sketch's doc states this wait
// ("An admitted TryUpdate waits only for an admitted TryUpdate of a key
// on the same stripe"); the root doc's one exception does not.
func TestAudit96RootLocksDocumentedRotatorTryUpdateWaitsOnStripe(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_000))
	law := newA96Gate()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Decay: law, Clock: clk},
		Generations: 2, Period: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("a")
	r.Update(k, 10)
	clk.Advance(time.Millisecond)
	// Calls 1 and 2: the primary's decision (both levels); call 3: the
	// younger generation's first level, with the stripe held.
	law.arm(3)
	first := make(chan bool, 1)
	go func() { first <- r.TryUpdate(k, 1, 100) }()
	select {
	case <-law.reached:
	case ok := <-first:
		t.Fatalf("setup: TryUpdate returned %v without reaching the law's held call", ok)
	}
	second := make(chan struct{})
	var ok2 bool
	go func() { ok2 = r.TryUpdate(k, 1, 100); close(second) }()
	returned := a96ReturnsOrWaits(t, second, "tryHold")
	close(law.release)
	ok1 := <-first
	<-second
	if !ok1 || !ok2 {
		t.Fatalf("TryUpdate(a, 1, 100) from 10: admitted %v, %v; want both", ok1, ok2)
	}
	if returned {
		t.Error("grudge.Rotator.TryUpdate(a) returned while another TryUpdate(a) held its stripe inside the Decay; doc.go: an admitted TryUpdate on that stripe waits")
	}
}

// TestAudit96RootLocksDocumentedLazyPromotionWaits (audit 96; documented at stop 59,
// the text below says what was wrong; doc.go now states the wait, and the
// test asserts it): the same sentence of
// doc.go, for a lazy root Rotator (no Ticker): the first operation after
// a Period ends builds the next generation (doc.go: "rotates lazily, on
// the first operation after a Period ends"), calling the HasherFactory;
// every other operation past the deadline spins until that build is
// published (internal/core/rotate.go, promote). Here the build is held
// inside the factory: a Query of another key does not return, it is seen
// spinning in promote. Package rotator's doc states the wait ("the others
// past the deadline wait for it (its build, once per Period)"); the root
// doc does not.
func TestAudit96RootLocksDocumentedLazyPromotionWaits(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_000))
	f := &a96Factory{reached: make(chan struct{}), release: make(chan struct{})}
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Hasher: f.factory, Clock: clk},
		Generations: 2, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Update([]byte("a"), 10)
	r.Update([]byte("b"), 20)
	clk.Advance(time.Second)
	f.mu.Lock()
	f.armed = true
	f.mu.Unlock()
	first := make(chan float64, 1)
	go func() { first <- r.Query([]byte("a")) }()
	select {
	case <-f.reached:
	case v := <-first:
		t.Fatalf("setup: Query returned %v without building a generation", v)
	}
	second := make(chan struct{})
	var b float64
	go func() { b = r.Query([]byte("b")); close(second) }()
	returned := a96ReturnsOrWaits(t, second, "promote")
	close(f.release)
	a := <-first
	<-second
	if a != 10 || b != 20 {
		t.Fatalf("after one Period with N = 2: Query(a) = %v, Query(b) = %v; want 10, 20 (the promoted generation was written all along)", a, b)
	}
	if returned {
		t.Error("a lazy grudge.Rotator's Query(b) past the deadline returned while another operation was building the promotion; doc.go: it waits for that build")
	}
	if n := r.Rotations(); n != 1 {
		t.Errorf("Rotations = %d; want 1", n)
	}
}

// a96Hash maps each key to the 64-bit hash it names (a table), so that
// the test chooses which cells keys share.
type a96Hash map[string]uint64

func (h a96Hash) Hash64(key []byte) uint64 { return h[string(key)] }

// a96Hook is a custom Decay (half-life 1 s) that runs do before its first
// call with dt > 0 once armed, and blocks its block-th such call until
// released.
type a96Hook struct {
	mu      sync.Mutex
	n       int
	armed   bool
	do      func()
	block   int
	reached chan struct{}
	release chan struct{}
}

func (g *a96Hook) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	g.mu.Lock()
	var do func()
	hit := false
	if g.armed {
		g.n++
		if g.n == 1 {
			do = g.do
		}
		hit = g.n == g.block
	}
	g.mu.Unlock()
	if do != nil {
		do()
	}
	if hit {
		close(g.reached)
		<-g.release
	}
	return score * math.Exp2(-float64(dt)/1000)
}

// TestAudit96RootLocksDocumentedSketchTryUpdateWaitsOnStripe (audit 96; documented at stop 59,
// the text below says what was wrong; doc.go now states the wait, and the
// test asserts it): the same
// sentence of doc.go for a plain root Sketch. Keys a and b share their
// level-0 cell only (a table Hasher). TryUpdate(a) snapshots a's cells;
// meanwhile (from inside the law's first call, standing in for another
// goroutine) Update(b) writes the shared cell, so a's commit CAS fails
// and it decides again holding its stripe (internal/core/tryupdate.go,
// commitConflict), calling the law for its idle level-1 cell: held there,
// a second TryUpdate(a) does not return, it is seen spinning in tryHold.
func TestAudit96RootLocksDocumentedSketchTryUpdateWaitsOnStripe(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_000))
	// index(h, l) = ((h1 + l*h2) * M) >> 32: a at cells 0 and 1, b at 0 and 2.
	table := a96Hash{"a": 0x10000001 << 32, "b": 0x20000001 << 32}
	law := &a96Hook{block: 4, reached: make(chan struct{}), release: make(chan struct{})}
	s, err := grudge.New(grudge.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Decay: law, Clock: clk,
		Hasher: func(uint64) grudge.Hasher { return table }})
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("a"), []byte("b")
	s.Update(a, 10)
	if d, e := s.QueryDetailed(a), s.QueryDetailed(b); d.CellIndexes[0] != e.CellIndexes[0] || d.CellIndexes[1] == e.CellIndexes[1] {
		t.Fatalf("cells a %v, b %v: want level 0 shared, level 1 not", d.CellIndexes, e.CellIndexes)
	}
	clk.Advance(time.Millisecond)
	// Call 1: a's level 0 in TryUpdate's snapshot, after Update(b) (call
	// 2: the shared cell). Call 3: a's level 1. The commit's CAS on level 0
	// fails; call 4: a's level 1 again, decided again with the stripe held.
	law.do = func() { s.Update(b, 5) }
	law.mu.Lock()
	law.armed = true
	law.mu.Unlock()
	first := make(chan bool, 1)
	go func() { first <- s.TryUpdate(a, 1, 100) }()
	select {
	case <-law.reached:
	case ok := <-first:
		t.Fatalf("setup: TryUpdate returned %v without reaching the law's held call", ok)
	}
	second := make(chan struct{})
	var ok2 bool
	go func() { ok2 = s.TryUpdate(a, 1, 100); close(second) }()
	returned := a96ReturnsOrWaits(t, second, "tryHold")
	close(law.release)
	ok1 := <-first
	<-second
	if !ok1 || !ok2 {
		t.Fatalf("TryUpdate(a, 1, 100) at about 10: admitted %v, %v; want both", ok1, ok2)
	}
	if returned {
		t.Error("grudge.Sketch.TryUpdate(a) returned while another TryUpdate(a) held its stripe inside the Decay after a commit conflict; doc.go: an admitted TryUpdate on that stripe waits")
	}
}
