package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// FakeTicker.Tick "returns when that rotation is done, so Rotations() read
// right after sees it": also when the rotation has to wait (here for a
// TryUpdate whose custom aggregator takes longer than a second).
func TestAudit30TickWithSlowTryUpdateInFlight(t *testing.T) {
	var block atomic.Bool
	inside := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	agg := func(s []float64) float64 {
		if block.Load() {
			once.Do(func() { close(inside) })
			<-release
		}
		return grudge.Min(s)
	}
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Aggregator: agg}, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	block.Store(true)
	var wg sync.WaitGroup
	var ok atomic.Bool
	wg.Go(func() { ok.Store(r.TryUpdate([]byte("k"), 1, 5)) })
	<-inside
	block.Store(false)
	tickDone := make(chan struct{})
	go func() { tk.Tick(); close(tickDone) }()
	<-tickDone // waits up to its internal second
	n := r.Rotations()
	close(release)
	wg.Wait()
	if n != 1 {
		t.Errorf("Rotations() right after Tick() returned = %d, want 1 (grudgetest/ticker.go: Tick \"returns when that rotation is done, so Rotations() read right after sees it\"); "+
			"Tick gave up after its 1 s handledWait while the rotation waited for a TryUpdate in flight", n)
	}
	if !ok.Load() || r.Query([]byte("k")) != 1 {
		t.Errorf("TryUpdate across the tick: admitted=%v, Query=%v; want true, 1", ok.Load(), r.Query([]byte("k")))
	}
}
