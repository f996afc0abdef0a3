package grudgetest

import (
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FakeClock is a clock that moves only when told to. It is a grudge.Clock
// (Now) and also a sketch.Clock (NowMillis), so the sketch reads it without
// converting. It reads Unix time, starts at the Unix epoch, and keeps
// sub-millisecond parts as a clock holding a time.Time does: ten
// Advance(100 * time.Microsecond) move it one millisecond. Safe for
// concurrent use: readers may race with Advance and Set.
type FakeClock struct {
	c sketchtest.FakeClock
}

// NewFakeClock returns a clock that reads the Unix epoch until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// Now returns the current reading (no monotonic reading).
func (c *FakeClock) Now() time.Time { return c.c.Now() }

// NowMillis returns the current reading in Unix milliseconds.
func (c *FakeClock) NowMillis() int64 { return c.c.NowMillis() }

// Advance moves the clock by d, sub-millisecond parts included (they
// accumulate). A negative d moves it back, which sketches read as no time
// passing.
func (c *FakeClock) Advance(d time.Duration) { c.c.Advance(d) }

// Set puts the clock at t.
func (c *FakeClock) Set(t time.Time) { c.c.SetTime(t) }
