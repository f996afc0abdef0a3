package reference_test

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A decayed counter: Linear decay drains 1 point per second, read through
// a fake clock.
func Example() {
	clk := sketchtest.NewFakeClock()
	s, err := reference.New(sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: clk})
	if err != nil {
		panic(err)
	}
	key := []byte("client-42")
	s.Update(key, 10)
	fmt.Println(s.Query(key))
	clk.Advance(4 * time.Second)
	fmt.Println(s.Query(key))
	clk.Advance(time.Minute)
	fmt.Println(s.Query(key))
	// Output:
	// 10
	// 6
	// 0
}

// A token bucket in debt form: each request costs 1, the debt drains at 2
// per second, and TryUpdate admits a request only while debt+1 <= 5.
func Example_tryUpdate() {
	clk := sketchtest.NewFakeClock()
	s, err := reference.New(sketch.Config{Lo: 0, Hi: 5, Decay: decay.Linear(2), Clock: clk})
	if err != nil {
		panic(err)
	}
	for i := range 7 {
		fmt.Println(i, s.TryUpdateString("10.0.0.1", 1, 5))
	}
	clk.Advance(time.Second) // 2 tokens come back
	fmt.Println(s.TryUpdateString("10.0.0.1", 1, 5), s.TryUpdateString("10.0.0.1", 1, 5), s.TryUpdateString("10.0.0.1", 1, 5))
	// Output:
	// 0 true
	// 1 true
	// 2 true
	// 3 true
	// 4 true
	// 5 false
	// 6 false
	// true true false
}

// Scores are clamped to [Lo, Hi]; UpdateAndQuery returns the clamped
// estimate.
func Example_updateAndQuery() {
	s, err := reference.New(sketch.Config{Lo: -3, Hi: 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.UpdateAndQueryString("abuser", 2))
	fmt.Println(s.UpdateAndQueryString("abuser", 2))
	fmt.Println(s.UpdateAndQueryString("abuser", -10))
	// Output:
	// 2
	// 3
	// -3
}

// QueryDetailed shows the key's cell at each level.
func Example_queryDetailed() {
	s, err := reference.New(sketch.Config{Levels: 2, CellsPerLevel: 1000, Hi: 10, Aggregator: sketch.Max})
	if err != nil {
		panic(err)
	}
	s.Update([]byte("k"), 4)
	d := s.QueryDetailed([]byte("k"))
	fmt.Println(d.Score, len(d.Levels), d.Levels[0].Score, d.Levels[1].Score)
	// Output:
	// 4 2 4 4
}

// New reports an invalid Config with the field and the value.
func ExampleNew() {
	_, err := reference.New(sketch.Config{Levels: 9, Hi: 1})
	fmt.Println(err)
	_, err = reference.New(sketch.Config{Hi: 1, Decay: decay.Exponential(0)})
	fmt.Println(err)
	// Output:
	// sketch: Levels must be <= 8; got 9
	// sketch: Decay is invalid: decay: Exponential lambda must be finite and > 0; got 0
}
