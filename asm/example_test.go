package asm_test

import (
	"fmt"
	"sync/atomic"

	"github.com/lfgrudge/grudge/asm"
)

// A Clock is read on every operation of a hot loop; its readings never go
// backwards within a goroutine.
func ExampleClock() {
	c := asm.NewClock()
	prev := c.NowMillis()
	ok := true
	for range 1000 {
		now := c.NowMillis()
		ok = ok && now >= prev
		prev = now
	}
	fmt.Println("monotonic:", ok)
	// Output: monotonic: true
}

// Backoff goes in the retry branch of a CAS loop.
func ExampleBackoff() {
	var max atomic.Int64
	raise := func(v int64) {
		var b asm.Backoff
		for old := max.Load(); v > old; old = max.Load() {
			if max.CompareAndSwap(old, v) {
				return
			}
			b.Spin()
		}
	}
	raise(3)
	raise(7)
	raise(5)
	fmt.Println(max.Load())
	// Output: 7
}
