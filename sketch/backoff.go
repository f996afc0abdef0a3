package sketch

import "runtime"

// backoff is bounded exponential backoff for the TryUpdate stripe wait:
// spin 1, 2, 4, ... 64 rounds, then yield the processor so a preempted
// stripe holder can run.
type backoff struct{ n uint32 }

func (b *backoff) spin() {
	if b.n >= 7 {
		runtime.Gosched()
		return
	}
	for i := 0; i < 1<<b.n; i++ {
		spinHint()
	}
	b.n++
}

//go:noinline
func spinHint() {}
