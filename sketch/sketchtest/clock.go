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
type FakeClock struct {
	ms atomic.Int64 // current time in Unix milliseconds
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.ms.Load() }

// Now returns the current reading as a time.Time (no monotonic reading).
func (c *FakeClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock by d (truncated to whole milliseconds); a
// negative d moves it backwards, which sketches treat as no time passing.
func (c *FakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Set puts the clock at ms.
func (c *FakeClock) Set(ms int64) { c.ms.Store(ms) }

// SetTime puts the clock at t.
func (c *FakeClock) SetTime(t time.Time) { c.ms.Store(t.UnixMilli()) }
