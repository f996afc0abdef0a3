package redis

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// localTime is the time of a Limiter's local sketches (the deny cache and
// the local fallback): they read LimiterConfig.Clock through one
// core.Timebase, whose time never steps back. A wait they compute counts
// from that time; when the clock stepped back behind it, the same wait
// counts lag() more from the clock's own reading, as package limit's
// stale-time gap and the server function's lag do.
type localTime struct {
	clock sketch.Clock   // LimiterConfig.Clock; nil: the monotonic system clock
	tb    *core.Timebase // the local sketches' Config.Clock
}

func newLocalTime(c sketch.Clock) *localTime {
	return &localTime{clock: c, tb: core.NewTimebase(c)}
}

// lag returns how far the local sketches' time, as a call that just
// returned used it, lies after the clock's reading now: 0 unless a Clock
// stepped back (the system clock never does), saturating at the largest
// Duration.
func (lt *localTime) lag() time.Duration {
	if lt.clock == nil {
		return 0
	}
	if g := lt.tb.HighWater() - lt.clock.NowMillis(); g > 0 {
		return msDuration(g)
	}
	return 0
}

// later returns the wait w made lag longer, saturating at the largest
// Duration; a wait of 0 (nothing to wait for) or a negative one (never)
// stays.
func later(w, lag time.Duration) time.Duration {
	if w <= 0 {
		return w
	}
	if w > math.MaxInt64-lag {
		return math.MaxInt64
	}
	return w + lag
}

// msDuration converts a server's wait in whole ms (-1: none) to a
// Duration, saturating at the largest Duration.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// serverClock returns the clock the server sketch sends its calls' time
// from: nil (the server's TIME) without a Clock, else the Clock's own
// reading, observed by the local sketches' time, so that a call the
// server ran at a reading the local sketches never saw (the clock then
// stepped back before the reply) still makes them behind: the deny cache
// does not date the server's debt at an earlier time than it was
// computed at.
func (lt *localTime) serverClock() sketch.Clock {
	if lt.clock == nil {
		return nil
	}
	return readingClock{lt.tb}
}

// readingClock is a Timebase's raw reading, observed (Timebase.Reading).
type readingClock struct{ tb *core.Timebase }

func (c readingClock) NowMillis() int64 { return c.tb.Reading() }
