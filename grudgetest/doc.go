// Package grudgetest provides a fake clock and a fake ticker for
// deterministic tests of code built on package grudge, as grudge's own
// grudgetest does: pass a *FakeClock as Config.Clock and a *FakeTicker as
// RotatorConfig.Ticker, then move time with Advance or Set and rotate with
// Tick.
//
//	clock := grudgetest.NewFakeClock()
//	ticker := grudgetest.NewFakeTicker()
//	r, _ := grudge.NewRotator(grudge.RotatorConfig{
//		Sketch: grudge.Config{Lo: 0, Hi: 10, Decay: grudge.Linear(1), Clock: clock},
//		Period: 15 * time.Second, Ticker: ticker,
//	})
//	defer r.Close()
//	clock.Advance(15 * time.Second)
//	ticker.Tick() // r.Rotations() now reads 1
package grudgetest
