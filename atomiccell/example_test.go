package atomiccell_test

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// A Word packs a float32 score (high half) and a 32-bit stamp (low half).
func ExamplePack() {
	w := atomiccell.Pack(1.5, 1234)
	fmt.Println(w.Score(), w.Stamp())
	fmt.Printf("%#016x\n", uint64(w))
	// Output:
	// 1.5 1234
	// 0x3fc00000000004d2
}

// RoundUp narrows toward +Inf, so a stored score never understates the
// float64 value it stands for, and saturates instead of overflowing.
func ExampleRoundUp() {
	x := 0.7
	f := atomiccell.RoundUp(x)
	fmt.Println(float64(f) >= x, float64(float32(x)) >= x)
	fmt.Println(atomiccell.RoundUp(1e300) == math.MaxFloat32, atomiccell.RoundUp(math.Inf(-1)) == -math.MaxFloat32)
	// Output:
	// true false
	// true true
}

// Cell.Add decays the stored score for its age, adds, clamps and stores,
// in one CAS loop.
func ExampleCell_Add() {
	r := atomiccell.NewRules(decay.Linear(1), 0, 100) // leak 1 per second, clamp to [0, 100]
	var c atomiccell.Cell
	c.Add(r, 0, 10, c.Load())        // at t=0 ms: 10
	w := c.Add(r, 4000, 1, c.Load()) // at t=4 s: 10-4+1
	fmt.Println(w.Score(), w.Stamp())
	w = c.Add(r, 5000, 500, c.Load()) // clamped at Hi
	fmt.Println(w.Score(), w.Stamp())
	w = c.Add(r, 4000, -500, c.Load()) // clock stepped back: no decay, clamped at Lo
	fmt.Println(w.Score(), w.Stamp())
	// Output:
	// 7 4000
	// 100 5000
	// 0 5000
}
