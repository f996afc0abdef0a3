package rotator_test

import (
	"fmt"
	"time"

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
