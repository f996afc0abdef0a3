package sketch

import (
	"math"
	"sync/atomic"

	"github.com/lfgrudge/grudge/asm"
	"golang.org/x/sys/cpu"
)

// systemMillis is the default clock: the runtime's monotonic clock
// (runtime nanotime, the clock behind time.Since) in milliseconds. It
// never steps with wall-clock adjustments.
//
// asm.Clock (RDTSCP, calibrated) is not the default: in the sketch's
// Update it measured no faster than nanotime on the 2-core KVM machine
// (docs/design.md, "Clock"), and the rule for adopting it is a win on
// both that machine and a 16-core server, whose run is pending. Users can
// pass asm.NewClock() as Config.Clock.
func systemMillis() int64 { return asm.Nanotime() / 1e6 }

// Monotonic turns any clock into one that never goes backwards: Observe
// returns the largest time it has been given, so a backwards step of the
// clock reads as time standing still until the clock catches up. That is
// what makes "a backwards clock step counts as zero elapsed time, never as
// growth" hold for every reader: without it a read-only Query at t, then
// another after the clock stepped back to t-5, would decay the second read
// less and see the score grow.
//
// The high-water mark sits on its own cache line and is written only when
// time advances (at most once per distinct millisecond), so on a busy
// sketch it costs one load of a line every core keeps shared. The zero
// value is not ready: use NewMonotonic. Safe for concurrent use.
type Monotonic struct {
	_  cpu.CacheLinePad
	hw atomic.Int64 // the largest time observed; starts at math.MinInt64
	_  cpu.CacheLinePad
}

// NewMonotonic returns a Monotonic that has observed nothing yet.
func NewMonotonic() *Monotonic {
	m := &Monotonic{}
	m.hw.Store(math.MinInt64)
	return m
}

// Observe records ms and returns max(ms, every earlier ms observed).
func (m *Monotonic) Observe(ms int64) int64 {
	h := m.hw.Load()
	for ms > h {
		if m.hw.CompareAndSwap(h, ms) {
			return ms
		}
		h = m.hw.Load()
	}
	return h
}
