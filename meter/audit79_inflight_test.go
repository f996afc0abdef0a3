package meter_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79InflightReleasePairing: a Release is idempotent (meter
// inflight.go: "takes it back (once, however often it is called)"); a
// nil or zero Guard's Release does nothing; a refused TryAcquire leaks
// nothing; Count is never negative.
func TestAudit79InflightReleasePairing(t *testing.T) {
	in, err := meter.NewInflight(10, meter.WithSeed(3), meter.WithSize(2, 8))
	if err != nil {
		t.Fatal(err)
	}
	g1 := in.Acquire("a")
	g2 := in.Acquire("a")
	if c := in.Count("a"); c != 2 {
		t.Fatalf("Count %d want 2", c)
	}
	g1.Release()
	g1.Release()
	g1.Release()
	if c := in.Count("a"); c != 1 {
		t.Fatalf("after triple Release of one guard: Count %d want 1", c)
	}
	var zero meter.Guard
	zero.Release()
	var nilg *meter.Guard
	nilg.Release()
	if c := in.Count("a"); c != 1 {
		t.Fatalf("after zero/nil Release: Count %d want 1", c)
	}
	g2.Release()
	g2.Release()
	for _, k := range []string{"a", "b", "c", "zzz"} {
		if c := in.Count(k); c != 0 {
			t.Fatalf("Count(%q) %d want 0", k, c)
		}
	}
	// fill to max, refusals leak nothing
	var gs []*meter.Guard
	for i := 0; i < 10; i++ {
		g := in.TryAcquire("x", 10)
		if g == nil {
			break
		}
		gs = append(gs, g)
	}
	for i := 0; i < 100; i++ {
		if g := in.TryAcquire("x", 10); g != nil {
			t.Fatalf("TryAcquire past max admitted (Count %d)", in.Count("x"))
		}
	}
	for _, g := range gs {
		g.Release()
	}
	if c := in.Count("x"); c != 0 {
		t.Fatalf("after releasing all: Count %d want 0 (got %d guards)", c, len(gs))
	}
	// max bounds
	if m := sketchtest.Panics(func() { in.TryAcquire("x", 11) }); m == "" {
		t.Errorf("TryAcquire(max 11) on maxLimit 10 did not panic")
	}
	if m := sketchtest.Panics(func() { in.TryAcquire("x", 0) }); m == "" {
		t.Errorf("TryAcquire(max 0) did not panic")
	}
	if g := in.TryAcquire("x", 10); g == nil {
		t.Errorf("TryAcquire(max = maxLimit) refused on an empty key")
	} else {
		g.Release()
	}
}

// TestAudit79InflightConcurrentColliding: many keys in a tiny sketch (every
// key collides), concurrent Acquire/TryAcquire/Release with racing double
// Releases, at GOMAXPROCS 1..8 under -race: at every quiescent point each
// key's Count is at least its true in-flight count, never negative; after
// everything is released every Count is 0 (conserved sums); and the true
// count of a key never exceeds max through TryAcquire.
func TestAudit79InflightConcurrentColliding(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(0, meter.WithSeed(uint64(runtime.GOMAXPROCS(0))), meter.WithSize(2, 4))
		if err != nil {
			t.Fatal(err)
		}
		const nkeys, workers, rounds, max = 16, 8, 3, 5
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%d", i)
		}
		var truth [nkeys]atomic.Int64
		for round := 0; round < rounds; round++ {
			var held [workers][]*meter.Guard
			var heldKey [workers][]int
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 300; i++ {
						k := (w*7 + i*3 + round) % nkeys
						switch i % 3 {
						case 0:
							g := in.Acquire(keys[k])
							truth[k].Add(1)
							held[w] = append(held[w], g)
							heldKey[w] = append(heldKey[w], k)
						case 1:
							if g := in.TryAcquire(keys[k], max); g != nil {
								// TryAcquire only admits when the whole count
								// (with unconditional Acquires) was below max.
								truth[k].Add(1)
								held[w] = append(held[w], g)
								heldKey[w] = append(heldKey[w], k)
							}
						case 2:
							if n := len(held[w]); n > 0 && i%2 == 0 {
								g, kk := held[w][n-1], heldKey[w][n-1]
								held[w], heldKey[w] = held[w][:n-1], heldKey[w][:n-1]
								// racing double Release of one guard
								var dw sync.WaitGroup
								dw.Add(2)
								go func() { defer dw.Done(); g.Release() }()
								go func() { defer dw.Done(); g.Release() }()
								dw.Wait()
								truth[kk].Add(-1)
							}
						}
					}
				}(w)
			}
			wg.Wait()
			for k := range keys {
				c, tr := in.Count(keys[k]), truth[k].Load()
				if c < 0 || int64(c) < tr {
					t.Fatalf("round %d: Count(%s) = %d below the truth %d", round, keys[k], c, tr)
				}
			}
			for w := range held {
				for i, g := range held[w] {
					g.Release()
					g.Release()
					truth[heldKey[w][i]].Add(-1)
				}
			}
			for k := range keys {
				if c := in.Count(keys[k]); c != 0 || truth[k].Load() != 0 {
					t.Fatalf("round %d: after all releases Count(%s) = %d (truth %d), want 0", round, keys[k], c, truth[k].Load())
				}
			}
		}
	})
}

// TestAudit79InflightTryAcquireExactColliding: N goroutines racing
// TryAcquire(k, max) without releasing get exactly max guards on a key
// alone (inflight.go: "N goroutines racing TryAcquire(k, 100) without
// releasing get exactly 100 guards"), and with colliding keys racing on
// the same cells the sum of guards per cell group never exceeds max
// for any key; after the releases all counts are 0.
func TestAudit79InflightTryAcquireExactColliding(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(100, meter.WithSeed(11), meter.WithSize(1, 1)) // one cell: every key shares it
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		var mu sync.Mutex
		var gs []*meter.Guard
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if g := in.TryAcquire(fmt.Sprintf("k%d", (w+i)%5), 100); g != nil {
						got.Add(1)
						mu.Lock()
						gs = append(gs, g)
						mu.Unlock()
					}
				}
			}(w)
		}
		wg.Wait()
		if got.Load() != 100 {
			t.Fatalf("one shared cell, 320 racing TryAcquire(max 100): %d guards, want exactly 100", got.Load())
		}
		if c := in.Count("anything"); c != 100 {
			t.Fatalf("Count %d want 100", c)
		}
		for _, g := range gs {
			g.Release()
		}
		if c := in.Count("k0"); c != 0 {
			t.Fatalf("after releases Count %d want 0", c)
		}
	})
}
