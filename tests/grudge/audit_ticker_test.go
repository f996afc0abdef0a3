package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// buildGate is a HasherFactory that can be armed to block once when
// building its i-th Hasher (the rotator builds one per generation, so
// this pauses a rotation inside Rotate until released).
type buildGate struct {
	built   atomic.Int64
	armed   atomic.Int64
	blocked chan struct{}
	release chan struct{}
}

func newBuildGate() *buildGate {
	g := &buildGate{blocked: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(-1)
	return g
}

func (g *buildGate) factory(seed uint64) grudge.Hasher {
	if g.armed.CompareAndSwap(g.built.Add(1)-1, -1) {
		close(g.blocked)
		<-g.release
	}
	return grudge.SipHash()(seed)
}

// TestAuditFakeTickerConcurrentTicks: FakeTicker is "safe for concurrent
// use" and each Tick "delivers one tick, which makes the attached Rotator
// rotate once, and returns when that rotation is done" (API.md: "Tick()
// rotates once; Rotations() read right after sees it"). Three Ticks while
// the rotator is busy with the first: each must rotate once and return
// only when its rotation is visible (a one-slot buffer used to drop the
// third, which returned at once with no rotation of its own).
func TestAuditFakeTickerConcurrentTicks(t *testing.T) {
	ft := grudgetest.NewFakeTicker()
	gate := newBuildGate()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 1, CellsPerLevel: 16, Hasher: gate.factory}, Ticker: ft,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	gate.armed.Store(gate.built.Load()) // the generation the first rotation builds
	var wg sync.WaitGroup
	wg.Go(ft.Tick) // tick 1: the rotator is now inside Rotate, blocked
	<-gate.blocked
	wg.Go(ft.Tick) // tick 2: waits for the rotator to take it
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	go func() { ft.Tick(); close(done) }() // tick 3
	select {
	case <-done:
		if got := r.Rotations(); got < 1 {
			t.Errorf("Tick 3 returned with Rotations() = %d: its rotation is not visible", got)
		}
	case <-time.After(50 * time.Millisecond): // blocked, as it should be until its rotation is done
	}
	close(gate.release)
	wg.Wait()
	<-done
	if got := r.Rotations(); got != 3 {
		t.Fatalf("three Ticks returned; Rotations() = %d, want 3", got)
	}
}
