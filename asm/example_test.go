package asm_test

import (
	"fmt"
	"sync/atomic"

	"github.com/lfgrudge/grudge/asm"
)

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
