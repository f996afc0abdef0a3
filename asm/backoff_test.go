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

func TestNewBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		first, max uint32
		want       []int
	}{
		{64, 1024, []int{64, 128, 256, 512, 1024, 1024, 1024, 1024, 1024, 1024, 0, 0}},
		{1, 64, []int{1, 2, 4, 8, 16, 32, 64, 64, 64, 64, 0}},
		{0, 0, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}},                        // first raised to 1, max to first
		{100, 10, []int{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 0}}, // max raised to first
		{3, 20, []int{3, 6, 12, 20, 20, 20, 20, 20, 20, 20, 0}},
		{1 << 31, 1<<32 - 1, []int{maxRound, maxRound, maxRound, maxRound, maxRound, maxRound, maxRound, maxRound, maxRound, maxRound, 0}}, // both capped
	} {
		b := NewBackoff(tc.first, tc.max)
		for round, w := range tc.want {
			if got := b.spins(); got != w {
				t.Fatalf("NewBackoff(%d, %d) round %d: next Spin pauses %d times; want %d (0 = Gosched)", tc.first, tc.max, round, got, w)
			}
			if w <= 1024 { // do not actually spin 2^31 times
				b.Spin()
			} else {
				b.n++
			}
		}
		b.Reset()
		if got := b.spins(); got != tc.want[0] {
			t.Fatalf("NewBackoff(%d, %d) after Reset spins %d; want the first round %d", tc.first, tc.max, got, tc.want[0])
		}
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
