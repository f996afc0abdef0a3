package grudge_test

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// A token bucket in debt form, as a rate limiter builds it on grudge:
// Linear decay refills, TryUpdate admits exactly up to the burst.
func Example() {
	clock := grudgetest.NewFakeClock()
	ticker := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{
			Decay: grudge.Linear(5), // 5 tokens per second
			Lo:    0, Hi: 10,        // burst 10
			Aggregator: grudge.Min,
			Hasher:     grudge.SipHash(),
			Clock:      clock,
		},
		Generations: 2,
		Period:      time.Minute,
		Ticker:      ticker,
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	key := []byte("client-42")
	admitted := 0
	for range 12 {
		if r.TryUpdate(key, 1, 10) {
			admitted++
		}
	}
	fmt.Println("admitted:", admitted)
	clock.Advance(200 * time.Millisecond) // one token back
	fmt.Println("after 200ms:", r.TryUpdate(key, 1, 10), r.TryUpdate(key, 1, 10))
	ticker.Tick()
	fmt.Println("rotations:", r.Rotations(), "debt:", r.Query(key))
	// Output:
	// admitted: 10
	// after 200ms: true false
	// rotations: 1 debt: 10
}

// SuggestLevels sizes L from the false-positive formula.
func ExampleSuggestLevels() {
	fmt.Println(grudge.SuggestLevels(1000, 100_000, 1e-8))
	fmt.Println(grudge.SuggestLevels(1000, 0, 1e-8))
	// Output:
	// 4 <nil>
	// 0 grudge: SuggestLevels: cellsPerLevel must be > 0; got 0
}
