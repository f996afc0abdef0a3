package rotator

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a99CountClock is a FakeClock that counts its readings.
type a99CountClock struct {
	c     *sketchtest.FakeClock
	reads atomic.Int64
}

func (c *a99CountClock) NowMillis() int64 { c.reads.Add(1); return c.c.NowMillis() }

// a99GateHasher is XXH3 under the generation's seed, except that the
// first hash of the key "slow" signals entered and waits for release.
type a99GateHasher struct {
	h       sketch.Hasher
	once    *atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g a99GateHasher) gate(key string) {
	if key == "slow" && g.once.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.release
	}
}

func (g a99GateHasher) Sum64(key []byte) uint64 { g.gate(string(key)); return g.h.Sum64(key) }

func (g a99GateHasher) Sum64String(key string) uint64 { g.gate(key); return g.h.Sum64String(key) }

// TestAudit99RotClockDocumentedTryUpdateRetryReadsClockTwice (audit 99;
// documented at stop 59, the text below says what was wrong; the docs
// now say a TryUpdate turned away by a promotion reads the clock again,
// and the test asserts it).
// TestAudit99RotClockFindingTryUpdateRetryReadsClockTwice: rotator.go
// (type Rotator): "Every operation reads the clock once, for decay and the
// rotation deadline alike", and doc.go: "Each operation loads the set and
// reads the clock once". A TryUpdate that loaded the set and read the
// clock before a deadline is held inside the primary's hash (a Hasher
// that waits); meanwhile the clock passes the deadline and a Query
// promotes, closing the old primary's stripes. Released, the TryUpdate
// finds its stripe closed and "decides again on the new set" (doc.go),
// but it does so through a second acquire, which reads the clock again:
// the two operations read the clock 3 times, not 2. (The retry's
// decision is at the later time; the admission itself is right: the new
// primary reads it.)
func TestAudit99RotClockDocumentedTryUpdateRetryReadsClockTwice(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	fc.Set(a99T0)
	clk := &a99CountClock{c: fc}
	var once atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	r, err := New(Config{
		Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.None(), Seed: 99, Clock: clk,
			Hasher: func(seed uint64) sketch.Hasher {
				return a99GateHasher{h: sketch.XXH3()(seed), once: &once, entered: entered, release: release}
			}},
		Generations: 2, Period: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.QueryString("x") // any reading New's setup left is done
	c0 := clk.reads.Load()
	done := make(chan bool)
	go func() { done <- r.TryUpdateString("slow", 1, 10) }()
	<-entered // the TryUpdate has its set and its time, before the deadline
	fc.Advance(10 * time.Millisecond)
	r.QueryString("x") // promotes: the old primary's stripes close
	close(release)
	if !<-done {
		t.Fatal("the TryUpdate was denied on an empty key")
	}
	reads := clk.reads.Load() - c0
	if got := r.QueryString("slow"); got != 1 {
		t.Fatalf("the new primary reads %v of the admission, want 1", got)
	}
	if st := r.Stats(); st.Promotions != 1 {
		t.Fatalf("Stats %+v, want one promotion", st)
	}
	if reads != 3 {
		t.Errorf("a TryUpdate retried across a promotion and a Query read the clock %d times; want 3 (once per operation, and again for the TryUpdate turned away)", reads)
	}
}
