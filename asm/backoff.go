package asm

import "runtime"

const (
	// defaultMaxSpins caps one round of the zero Backoff: 64 Pause calls.
	defaultMaxSpins = 64
	// maxRound caps any round at 2^20 Pause calls (milliseconds of
	// spinning: far past any sensible setting), so the count fits an int
	// on 32-bit platforms too.
	maxRound = 1 << 20
	// yieldAfter is the number of spinning rounds before Spin yields the
	// processor with runtime.Gosched instead.
	yieldAfter = 10
)

// Backoff is bounded exponential backoff for CAS and spin loops: round k
// (counting from 0) spins min(first<<k, limit) Pause calls, and from round
// 10 on each Spin calls runtime.Gosched instead, so a waiter whose peer was
// descheduled lets it run. The zero value is ready to use and spins 1, 2,
// 4, ... 64 Pause calls; [NewBackoff] sets another first round and cap.
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
	// first and limit are the Pause calls of round 0 and the cap on one
	// round; 0 means the zero value's 1 and 64. Invariant: first <= limit
	// once both are set (NewBackoff clamps).
	first, limit uint32
}

// NewBackoff returns a Backoff whose first round spins first Pause calls
// and whose rounds double up to limit Pause calls (first is raised to 1
// and limit to first where they are smaller; both are capped at 2^20). A
// long first round suits a lost race on a hot cache line: waiting a few
// of the winner's operation times lets it run them on a line that stays
// in its cache, instead of both cores paying a transfer on every
// operation.
func NewBackoff(first, limit uint32) Backoff {
	first = min(max(first, 1), maxRound)
	return Backoff{first: first, limit: min(max(limit, first), maxRound)}
}

// spins returns how many Pause calls the next Spin makes; 0 means it will
// call runtime.Gosched instead.
func (b *Backoff) spins() int {
	if b.n >= yieldAfter {
		return 0
	}
	first, limit := uint64(max(b.first, 1)), uint64(b.limit)
	if limit == 0 {
		limit = defaultMaxSpins
	}
	// n < yieldAfter = 10 and first <= 2^20, so the shift cannot overflow.
	return int(min(first<<b.n, limit))
}

// Spin waits one round: first, 2*first, 4*first, ... up to limit Pause
// calls (1, 2, ... 64 for the zero value), then, after yieldAfter rounds,
// runtime.Gosched on every call.
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

// Reset returns b to its first round, keeping its schedule, for reuse
// after the contended operation succeeded.
func (b *Backoff) Reset() { b.n = 0 }
