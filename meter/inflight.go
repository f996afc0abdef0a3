package meter

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
)

// Inflight counts requests in flight per key (pingora-limits' Inflight),
// in constant memory: for connection or concurrency limits that answer
// 503. Create one with NewInflight; the zero Inflight is not usable (its
// methods panic with "meter: zero Inflight; use NewInflight"). Safe for
// concurrent use.
//
// Acquire adds 1 to the key's cells and returns a Guard whose Release
// takes it back (once, however often it is called). TryAcquire(key, max)
// acquires only if the count is below max, exactly under contention
// (the sketch's TryUpdate): N goroutines racing TryAcquire(k, 100)
// without releasing get exactly 100 guards. Count is an upper bound on
// the key's true in-flight count (Min of L cells, each holding the key's
// count plus its collisions'), so a collision can refuse a key early but
// never admit it past max.
//
// The counts are exact integers through collisions at any maxLimit: the
// sketch's clamp Hi is MaxFloat32, far above any count, so a +1 into a
// cell shared with other keys is never cut (with Hi = maxLimit, a cell
// shared with a key already at max threw the +1 away, and after the
// releases the key was under-counted and admitted past max); every
// decision is TryUpdate's limit, aggregate + 1 <= max. A cell is exact up
// to 2^24 in flight over all the keys that share it, and rounds up (an
// over-count, never under) beyond; past 2^24 a -1 rounds back up to the
// same value, so a cell that once held more than 2^24 (only Acquire,
// which has no max, can take it there) keeps that count after every
// release: the keys that share it are refused by TryAcquire for good.
//
// Inflight uses one sketch with no decay and no rotation, on purpose:
// the counts are conserved (every +1 is matched by its -1), so there is
// nothing to forget, and rotating would drop the +1 of a long request
// from the new generation while its later -1 would take a colliding
// key's count there. A Guard that is never released leaks its 1 for
// good; release with defer.
//
// Inflight has no snapshot (WriteTo/ReadFrom), on purpose: its counts
// are requests of this process, each owed a Release by a Guard that dies
// with the process, so counts restored in another process would never be
// released and would refuse their keys for good.
type Inflight struct {
	s   *core.Sketch
	max float64 // maxLimit
}

// Guard is one acquisition; Release gives it back. A Guard is safe for
// concurrent use; Release is idempotent.
type Guard struct {
	in       *Inflight
	key      string
	released atomic.Bool
}

// Release gives the acquisition back; only the first call does anything.
// Release on a nil Guard (a refused TryAcquire) or a zero Guard does
// nothing.
func (g *Guard) Release() {
	if g == nil || g.in == nil || !g.released.CompareAndSwap(false, true) {
		return
	}
	g.in.s.UpdateString(g.key, -1)
}

// NewInflight returns an Inflight whose TryAcquire limits are at most
// maxLimit (0 means, and at most, 2^24: a count exact in a float32 cell).
// An invalid maxLimit or option is a *sketch.ConfigError prefixed
// "meter: ". Rotation options (WithPeriodWindows, WithPrefetch) do not
// apply and are not checked.
func NewInflight(maxLimit int, opts ...Option) (*Inflight, error) {
	if maxLimit == 0 {
		maxLimit = 1 << 24
	}
	if maxLimit < 0 || maxLimit > 1<<24 {
		return nil, bad("MaxLimit", maxLimit, "Inflight maxLimit must be in (0, 2^24] (exact in float32); got %v", maxLimit)
	}
	o, err := collect(opts, 1)
	if err != nil {
		return nil, err
	}
	s, err := core.New(o.Sketch(decay.None(), 0, math.MaxFloat32, core.Min, o.Clock))
	if err != nil {
		return nil, core.Prefixed("meter", err)
	}
	// Counts are conserved: a refused TryAcquire whose commit met a
	// conflict takes its +1 back out of every cell, so it leaks nothing.
	s.SetConserved()
	return &Inflight{s: s, max: float64(maxLimit)}, nil
}

// sketch returns in's sketch, or panics on the zero Inflight.
func (in *Inflight) sketch() *core.Sketch {
	if in.s == nil {
		panic("meter: zero Inflight; use NewInflight")
	}
	return in.s
}

// Acquire counts one more request in flight for key, unconditionally.
func (in *Inflight) Acquire(key string) *Guard {
	in.sketch().UpdateString(key, 1)
	return &Guard{in: in, key: key}
}

// TryAcquire acquires only if key has fewer than max in flight, and
// returns nil otherwise. It panics, with a message that starts "meter:",
// if max < 1 or max is above the Inflight's maxLimit.
func (in *Inflight) TryAcquire(key string, max int) *Guard {
	s := in.sketch()
	if max < 1 || float64(max) > in.max {
		panic(fmt.Sprintf("meter: TryAcquire: max must be in 1..%v; got %d", in.max, max))
	}
	if !s.TryUpdateString(key, 1, float64(max)) {
		return nil
	}
	return &Guard{in: in, key: key}
}

// Count returns the key's in-flight count (an upper bound, see Inflight).
func (in *Inflight) Count(key string) int {
	return int(math.Ceil(in.sketch().QueryString(key)))
}
