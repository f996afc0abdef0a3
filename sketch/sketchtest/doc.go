// Package sketchtest holds test helpers for code that uses the sketch:
// a FakeClock that only moves when told, so decay, rotation and clock
// jumps can be tested deterministically. A FakeClock satisfies
// sketch.Clock and is safe for concurrent use.
//
//	clk := sketchtest.NewFakeClock()
//	s, _ := sketch.New(sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: clk})
//	s.Update(k, 10)
//	clk.Advance(5 * time.Second)
//	s.Query(k) // 5
package sketchtest
