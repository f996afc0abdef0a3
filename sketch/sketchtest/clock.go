package sketchtest

import (
	"math"
	"runtime"
	"sync"
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
	mu  sync.Mutex    // serializes the moves
	seq atomic.Uint64 // odd while a move is under way: Now reads again
	ms  atomic.Int64  // current time in Unix milliseconds, carries included
	sub atomic.Int64  // sum of the sub-millisecond parts of the Advances since the last Set, in ns
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.ms.Load() }

// Now returns the current reading as a time.Time (no monotonic reading),
// with the sub-millisecond fraction the Advances left: a reading the
// clock held, never a fraction of one move beside the milliseconds of
// another.
func (c *FakeClock) Now() time.Time {
	for {
		s := c.seq.Load()
		ms, sub := c.ms.Load(), c.sub.Load()
		if s&1 == 0 && c.seq.Load() == s {
			return time.UnixMilli(ms).Add(time.Duration(floorMod(sub, 1e6)))
		}
		runtime.Gosched()
	}
}

// move runs f, which changes ms and sub, as one step for Now.
func (c *FakeClock) move(f func()) {
	c.mu.Lock()
	c.seq.Add(1)
	f()
	c.seq.Add(1)
	c.mu.Unlock()
}

// Advance moves the clock by d; a negative d moves it backwards, which
// sketches treat as no time passing. The whole milliseconds of d move
// NowMillis at once; its sub-millisecond part accumulates, and each
// millisecond the parts add up to moves NowMillis by one. It saturates
// at the ends of int64 milliseconds: a move past the end leaves the
// clock at its last nanosecond (MaxInt64 ms and 999,999 ns) or its
// first (MinInt64 ms), never wrapped, and Now never moves against d.
func (c *FakeClock) Advance(d time.Duration) {
	whole, rem := int64(d/time.Millisecond), int64(d%time.Millisecond)
	c.move(func() {
		carry := int64(0)
		if rem != 0 {
			n := c.sub.Add(rem)
			carry = floorDiv(n, 1e6) - floorDiv(n-rem, 1e6)
		}
		ms, step := c.ms.Load(), whole+carry
		switch {
		case step > 0 && ms > math.MaxInt64-step:
			c.pin(math.MaxInt64, 1e6-1)
		case step < 0 && ms < math.MinInt64-step:
			c.pin(math.MinInt64, 0)
		default:
			c.ms.Store(ms + step)
		}
	})
}

// pin puts the clock at ms and the fraction frac (ns), keeping the
// whole milliseconds sub had counted, so later carries stay right: the
// saturation of Advance and SetTime (audits 125, 127: the fraction kept
// adding up at the end and wrapped, moving Now back).
func (c *FakeClock) pin(ms, frac int64) {
	c.sub.Store(floorDiv(c.sub.Load(), 1e6)*1e6 + frac)
	c.ms.Store(ms)
}

// Set puts the clock at ms, with no sub-millisecond fraction.
func (c *FakeClock) Set(ms int64) { c.move(func() { c.sub.Store(0); c.ms.Store(ms) }) }

// SetTime puts the clock at t, its sub-millisecond fraction included; a
// t beyond the int64 milliseconds saturates as Advance does (audit 127:
// it wrapped).
func (c *FakeClock) SetTime(t time.Time) {
	c.move(func() {
		switch {
		case t.After(maxTime):
			c.sub.Store(0)
			c.pin(math.MaxInt64, 1e6-1)
		case t.Before(minTime):
			c.sub.Store(0)
			c.pin(math.MinInt64, 0)
		default:
			c.sub.Store(int64(t.Nanosecond() % 1e6))
			c.ms.Store(t.UnixMilli())
		}
	})
}

// maxTime and minTime are the last and first instants of the int64
// milliseconds.
var (
	maxTime = time.UnixMilli(math.MaxInt64).Add(time.Millisecond - 1)
	minTime = time.UnixMilli(math.MinInt64)
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
