// Package sketchtest holds test helpers for code that uses the sketch,
// and the conformance suites for code that implements one.
//
// A FakeClock only moves when told, so decay, rotation and clock jumps
// can be tested deterministically. It satisfies sketch.Clock and is safe
// for concurrent use.
//
//	clk := sketchtest.NewFakeClock()
//	s, _ := sketch.New(sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: clk})
//	s.Update(k, 10)
//	clk.Advance(5 * time.Second)
//	s.Query(k) // 5
//
// TestScorer checks a sketch.Scorer against the contract package sketch
// states, in the manner of testing/fstest.TestFS; TestRotator checks a
// rotator (TestScorer's checks, where a long idle time forgets, plus the
// rotation window and TryUpdate across rotations):
//
//	func TestConformance(t *testing.T) {
//		sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer {
//			s, err := mysketch.New(cfg)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
package sketchtest
