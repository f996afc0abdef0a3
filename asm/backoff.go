package asm

import "runtime"

const (
	// maxSpinShift caps one round at 1<<maxSpinShift = 64 Pause calls.
	maxSpinShift = 6
	// yieldAfter is the number of spinning rounds before Spin yields the
	// processor with runtime.Gosched instead.
	yieldAfter = 10
)

// Backoff is bounded exponential backoff for CAS and spin loops: round k
// (counting from 0) spins min(2^k, 64) Pause calls, and from round 10 on
// each Spin calls runtime.Gosched instead, so a waiter whose peer was
// descheduled lets it run. The zero value is ready to use.
//
// A Backoff belongs to one goroutine, typically as a local in the retry
// loop; it is not safe for concurrent use.
//
//	var b asm.Backoff
//	for !cell.CompareAndSwap(old, new) {
//		b.Spin()
//		old = cell.Load()
//	}
type Backoff struct {
	// n counts the rounds spun so far. Invariant: n <= yieldAfter.
	n uint32
}

// spins returns how many Pause calls the next Spin makes; 0 means it will
// call runtime.Gosched instead.
func (b *Backoff) spins() int {
	if b.n >= yieldAfter {
		return 0
	}
	return 1 << min(b.n, maxSpinShift)
}

// Spin waits one round: 1, 2, 4, ... up to 64 Pause calls, then, after
// yieldAfter rounds, runtime.Gosched on every call.
func (b *Backoff) Spin() {
	k := b.spins()
	if k == 0 {
		runtime.Gosched()
		return
	}
	for range k {
		Pause()
	}
	b.n++
}

// Reset returns b to its zero state, for reuse after the contended
// operation succeeded.
func (b *Backoff) Reset() { b.n = 0 }
