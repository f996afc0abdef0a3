package hw_test

import (
	"fmt"

	"github.com/lfgrudge/grudge/internal/hw"
)

// A Clock is read on every operation of a hot loop; its readings never go
// backwards within a goroutine.
func ExampleClock() {
	c := hw.NewClock()
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
