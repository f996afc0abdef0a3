package meter_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// countingHasher is XXH3 that counts the keys it hashes.
type countingHasher struct {
	sketch.Hasher
	n *atomic.Int64
}

func (h countingHasher) Sum64(key []byte) uint64 { h.n.Add(1); return h.Hasher.Sum64(key) }
func (h countingHasher) Sum64String(key string) uint64 {
	h.n.Add(1)
	return h.Hasher.Sum64String(key)
}

func countingFactory(n *atomic.Int64) sketch.HasherFactory {
	return func(seed uint64) sketch.Hasher { return countingHasher{sketch.XXH3()(seed), n} }
}

// TestWithHasher: every meter hashes its keys with the factory given
// (and so never with the default SipHash).
func TestWithHasher(t *testing.T) {
	var n atomic.Int64
	opt := meter.WithHasher(countingFactory(&n))
	r, err := meter.NewRate(time.Second, opt)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := meter.NewNovelty(time.Second, opt)
	if err != nil {
		t.Fatal(err)
	}
	in, err := meter.NewInflight(0, opt)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"Rate.Observe":        func() { r.Observe("k") },
		"Rate.PerSecond":      func() { r.PerSecond("k") },
		"Novelty.Seen":        func() { nv.Seen("k") },
		"Novelty.Contains":    func() { nv.Contains("k") },
		"Inflight.Acquire":    func() { in.Acquire("k").Release() },
		"Inflight.Count":      func() { in.Count("k") },
		"Inflight.TryAcquire": func() { in.TryAcquire("k", 1).Release() },
	} {
		before := n.Load()
		f()
		if n.Load() == before {
			t.Errorf("%s did not hash with WithHasher's factory", name)
		}
	}
}

// TestAccessors: Window and Within return the durations the meters were
// built with.
func TestAccessors(t *testing.T) {
	r, err := meter.NewRate(1500 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Window(); got != 1500*time.Millisecond {
		t.Errorf("Window() = %v, want 1.5s", got)
	}
	n, err := meter.NewNovelty(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Within(); got != time.Minute {
		t.Errorf("Within() = %v, want 1m", got)
	}
}

// TestNoveltyContainsAt: ContainsAt reads at the given time, only reads,
// and takes t as the At forms do (a past t counts as the latest time
// used, a future one as the clock's reading).
func TestNoveltyContainsAt(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	n, err := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	if n.SeenAt(t0, "k") {
		t.Fatal("a fresh key was seen")
	}
	clk.Advance(999 * time.Millisecond)
	if !n.ContainsAt(clk.Now(), "k") || !n.ContainsAt(t0, "k") {
		t.Fatal("ContainsAt within T: not seen")
	}
	if n.ContainsAt(clk.Now(), "other") {
		t.Fatal("ContainsAt marked a key")
	}
	if n.ContainsAt(clk.Now().Add(time.Hour), "k") != true {
		t.Fatal("a future t moved the Novelty past T")
	}
	clk.Advance(2 * time.Millisecond)
	if n.ContainsAt(clk.Now(), "k") || n.Contains("k") {
		t.Fatal("ContainsAt after T: still seen")
	}
	if n.ContainsAt(t0, "k") {
		t.Fatal("a past t read the Novelty as it was")
	}
}
