package sketchtest

import (
	"sync/atomic"
	"time"
)

// FakeClock is a manually driven clock for deterministic tests. Its scale
// is Unix milliseconds: NowMillis() == Now().UnixMilli(), so a sketch
// converts a time.Time from Now() (or time.UnixMilli) exactly. The zero
// value and NewFakeClock both read 0 ms (the Unix epoch). Safe for
// concurrent use: readers may race with Advance and Set.
//
// Advance keeps sub-millisecond parts: they accumulate, so ten
// Advance(100 * time.Microsecond) move NowMillis by one, as a clock that
// holds a time.Time would; Now carries the fraction too.
type FakeClock struct {
	ms  atomic.Int64 // current time in Unix milliseconds, carries included
	sub atomic.Int64 // sum of the sub-millisecond parts of the Advances since the last Set, in ns
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.ms.Load() }

// Now returns the current reading as a time.Time (no monotonic reading),
// with the sub-millisecond fraction the Advances left.
func (c *FakeClock) Now() time.Time {
	return time.UnixMilli(c.ms.Load()).Add(time.Duration(floorMod(c.sub.Load(), 1e6)))
}

// Advance moves the clock by d; a negative d moves it backwards, which
// sketches treat as no time passing. The whole milliseconds of d move
// NowMillis at once; its sub-millisecond part accumulates, and each
// millisecond the parts add up to moves NowMillis by one.
func (c *FakeClock) Advance(d time.Duration) {
	whole, rem := int64(d/time.Millisecond), int64(d%time.Millisecond)
	carry := int64(0)
	if rem != 0 {
		n := c.sub.Add(rem)
		carry = floorDiv(n, 1e6) - floorDiv(n-rem, 1e6)
	}
	c.ms.Add(whole + carry)
}

// Set puts the clock at ms, with no sub-millisecond fraction.
func (c *FakeClock) Set(ms int64) { c.sub.Store(0); c.ms.Store(ms) }

// SetTime puts the clock at t, its sub-millisecond fraction included.
func (c *FakeClock) SetTime(t time.Time) {
	c.sub.Store(int64(t.Nanosecond() % 1e6))
	c.ms.Store(t.UnixMilli())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
