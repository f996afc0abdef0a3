package sketchtest

import (
	"sync/atomic"
	"time"
)

// FakeClock is a manually driven clock for deterministic tests. The zero
// value reads 0 ms; NewFakeClock starts at 0 too. Safe for concurrent use:
// readers may race with Advance and Set.
type FakeClock struct {
	ms atomic.Int64 // current time in milliseconds
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.ms.Load() }

// Advance moves the clock by d (truncated to whole milliseconds); a
// negative d moves it backwards, which sketches treat as no time passing.
func (c *FakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Set puts the clock at ms.
func (c *FakeClock) Set(ms int64) { c.ms.Store(ms) }
