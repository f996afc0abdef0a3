package atom

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReleaseAddsOne: Release takes an odd seq (held) to the next even
// value, in whichever build (the plain store of release_tso.go writes the
// atomic.Uint64's own word).
func TestReleaseAddsOne(t *testing.T) {
	var seq atomic.Uint64
	for _, start := range []uint64{0, 2, 1 << 40, 1<<64 - 4} {
		seq.Store(start)
		if !seq.CompareAndSwap(start, start+1) {
			t.Fatalf("acquire from %d failed", start)
		}
		Release(&seq)
		if got := seq.Load(); got != start+2 {
			t.Fatalf("Release after acquiring %d: seq %d, want %d", start, got, start+2)
		}
	}
}

// TestReleaseSeqlock: writers take a seqlock by CAS from even to odd, move
// two plain counters in opposite directions and Release; readers that see
// the same even seq before and after reading the counters must see them
// sum to zero, and the writers' holds must be mutually exclusive (the
// final count is exact). Under -race Release is the atomic add, in the
// default amd64 build the plain store: a store that passed the counters'
// writes, or a hold two writers shared, fails it.
func TestReleaseSeqlock(t *testing.T) {
	var (
		seq  atomic.Uint64
		a, b int64 // guarded by seq: written only while it is odd
		torn atomic.Int64
	)
	writers, per := 4, 20000
	if testing.Short() {
		per = 2000
	}
	done := make(chan struct{})
	var rd sync.WaitGroup
	for range 2 {
		rd.Add(1)
		go func() {
			defer rd.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				s1 := seq.Load()
				if s1&1 != 0 {
					runtime.Gosched()
					continue
				}
				// Racy plain reads, validated by seq as a seqlock reader
				// does; read through atomics so -race stays quiet.
				x := atomic.LoadInt64(&a)
				y := atomic.LoadInt64(&b)
				if seq.Load() == s1 && x+y != 0 {
					torn.Add(1)
				}
			}
		}()
	}
	var wr sync.WaitGroup
	for range writers {
		wr.Add(1)
		go func() {
			defer wr.Done()
			for i := 0; i < per; {
				s := seq.Load()
				if s&1 != 0 || !seq.CompareAndSwap(s, s+1) {
					runtime.Gosched()
					continue
				}
				atomic.StoreInt64(&a, atomic.LoadInt64(&a)+1)
				atomic.StoreInt64(&b, atomic.LoadInt64(&b)-1)
				Release(&seq)
				i++
			}
		}()
	}
	wr.Wait()
	close(done)
	rd.Wait()
	if n := torn.Load(); n != 0 {
		t.Fatalf("%d reads saw a half-made write under an unchanged even seq", n)
	}
	if want := int64(writers * per); a != want || b != -want {
		t.Fatalf("a, b = %d, %d after %d holds: want %d, %d", a, b, writers*per, want, -want)
	}
	if got := seq.Load(); got != uint64(2*writers*per) {
		t.Fatalf("seq %d, want %d", got, 2*writers*per)
	}
}
