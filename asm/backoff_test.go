package asm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBackoffCaps(t *testing.T) {
	want := []int{1, 2, 4, 8, 16, 32, 64, 64, 64, 64, 0, 0, 0}
	var b Backoff
	for round, w := range want {
		if got := b.spins(); got != w {
			t.Fatalf("round %d: next Spin pauses %d times; want %d (0 = Gosched)", round, got, w)
		}
		b.Spin()
	}
	for range 1000 {
		b.Spin()
	}
	if b.n != yieldAfter {
		t.Fatalf("after many rounds n = %d; want it saturated at %d", b.n, yieldAfter)
	}
	b.Reset()
	if b != (Backoff{}) || b.spins() != 1 {
		t.Fatalf("after Reset: %+v spins %d; want zero value spinning 1", b, b.spins())
	}
}

// TestBackoffCASCounter uses Backoff in the loop it is for and checks the
// conserved quantity: every increment lands exactly once.
func TestBackoffCASCounter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	workers, per := 8, 2000
	if testing.Short() {
		per = 200
	}
	for _, procs := range []int{1, 2, runtime.NumCPU()} {
		runtime.GOMAXPROCS(procs)
		var ctr atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range per {
					var b Backoff
					for old := ctr.Load(); !ctr.CompareAndSwap(old, old+1); old = ctr.Load() {
						b.Spin()
					}
				}
			})
		}
		wg.Wait()
		if got, want := ctr.Load(), int64(workers*per); got != want {
			t.Fatalf("GOMAXPROCS=%d: counter = %d; want %d", procs, got, want)
		}
	}
}
