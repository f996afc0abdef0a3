package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// newFake returns a limiter on a fake clock set to 1,000,000 ms, seeded
// for reproducible cells.
func newFake(t testing.TB, lim limit.Limit, burst int, opts ...limit.Option) (*limit.Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}
