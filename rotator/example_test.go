package rotator_test

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A rotator forgets: a key written once is read back for Generations x
// Period at most, then is gone, even without decay. Rotation happens on
// access; nothing runs in the background.
func Example() {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Hi: 1e6, Clock: clk},
		Generations: 2,
		Period:      time.Minute,
	})
	if err != nil {
		panic(err)
	}
	defer r.Close() // a no-op, kept for grudge compatibility

	r.UpdateString("10.0.0.1", 3)
	fmt.Println(r.QueryString("10.0.0.1"))
	clk.Advance(time.Minute) // first rotation: the second generation has it too
	fmt.Println(r.QueryString("10.0.0.1"))
	clk.Advance(time.Minute) // second rotation: every generation that saw it is retired
	fmt.Println(r.QueryString("10.0.0.1"))
	fmt.Println(r.Stats().Promotions)
	// Output:
	// 3
	// 3
	// 0
	// 2
}

// TryUpdate decides on the primary generation, exactly, and commits to the
// others: a limit of 3 per key admits 3 calls.
func ExampleRotator_TryUpdateString() {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, Clock: clk}, Period: time.Second})
	if err != nil {
		panic(err)
	}
	for range 4 {
		fmt.Print(r.TryUpdateString("user-7", 1, 3), " ")
	}
	fmt.Println()
	// Output:
	// true true true false
}

// Keys from clients: SipHash under a secret seed, so no client can choose
// keys that collide with a victim's, on a rotator, so every generation
// rehashes under a new seed. Here a token bucket in debt form: the debt
// drains 10 per second and a request is admitted while it stays within
// 20 (the README's example).
func Example_clientKeys() {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{
			Decay:  decay.Linear(10),
			Hi:     100,
			Hasher: sketch.SipHash(),
			Seed:   sketch.RandomSeed(),
			Clock:  clk,
		},
		Period: time.Minute,
	})
	if err != nil {
		panic(err)
	}
	admitted := 0
	for range 25 {
		if r.TryUpdateString("198.51.100.7", 1, 20) {
			admitted++
		}
	}
	clk.Advance(time.Second) // 10 drain
	fmt.Println(admitted, r.TryUpdateString("198.51.100.7", 10, 20), r.TryUpdateString("198.51.100.7", 1, 20))
	// Output: 20 true false
}
