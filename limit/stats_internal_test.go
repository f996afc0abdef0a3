package limit

import (
	"sync"
	"testing"
)

// TestCounterShards: concurrent goroutines spread over the counter
// shards (the stack-address hint), so that they do not all write one
// line; and the sum is exact.
func TestCounterShards(t *testing.T) {
	var c counters
	const n = 64
	var ready, hold sync.WaitGroup
	ready.Add(n)
	hold.Add(1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ready.Done()
			hold.Wait() // all alive at once: no stack is reused
			for range 10 {
				c.count(i%2 == 0)
			}
		})
	}
	ready.Wait()
	hold.Done()
	wg.Wait()
	used := 0
	for i := range c.s {
		if c.s[i].n[0].Load()+c.s[i].n[1].Load() > 0 {
			used++
		}
	}
	a, d := c.sum()
	if a != n/2*10 || d != n/2*10 {
		t.Fatalf("sum %d, %d; want %d each", a, d, n/2*10)
	}
	// 64 distinct stacks hashed into 64 shards fill about 40 of them.
	if used < 16 {
		t.Fatalf("%d goroutines wrote only %d of %d shards", n, used, counterShards)
	}
	t.Logf("%d goroutines wrote %d of %d shards", n, used, counterShards)
}
