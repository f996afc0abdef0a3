package grudge

import (
	"math"
	"sync"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
)

// RotatorConfig describes a Rotator, as grudge v0.1.0 has it.
type RotatorConfig struct {
	// Sketch configures every generation; each hashes under its own seed.
	Sketch Config
	// Generations is N, the live generations; 0 means 2; at least 2 and
	// at most 1024.
	Generations uint32
	// Period is how long a generation stays the primary, counted in whole
	// ms rounded up (2.9 ms is 3). Required (at least 1ms) without a
	// Ticker; with one it is optional and unused (any value >= 0: the
	// ticks alone rotate).
	Period time.Duration
	// Ticker drives rotation: one rotation per tick, by one goroutine that
	// Close stops. nil means rotation every Period, done lazily by the
	// operation that finds the period over: no goroutine, no timer.
	Ticker Ticker
}

// Ticker delivers ticks, as *time.Ticker does (wrap one with C returning
// its C). grudgetest.FakeTicker is one for tests. A Ticker may also have a
// method TickHandled(), which the rotator calls after each rotation it made
// for a tick, so a fake can wait until its tick is visible.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// tickHandler is the optional method of a Ticker described above.
type tickHandler interface{ TickHandled() }

// periodWithTicker stands in for an unset Period when a Ticker drives
// rotation: the core needs one but, rotating only on Rotate, never uses it.
const periodWithTicker = time.Hour

// Rotator keeps N generations of a Sketch: writes go to all, reads to the
// oldest (the primary, warmed by a full period of writes), and the
// primary retires every period, so a score lives at most N x Period after
// its last write. It is a thin face over *rotator.Rotator. Build one with
// NewRotator (the zero Rotator's methods but Close and Native, which
// returns nil, panic with "grudge: zero Rotator; use NewRotator"); call
// Close when done if it has a Ticker. Safe for
// concurrent use; the hot-path methods do not allocate, except a lazy
// rotator's one operation per Period that builds the next generation.
type Rotator struct {
	r      *rotator.Rotator
	e      *core.Rotator // the engine under r: Rotate for the ticks
	ticker Ticker        // nil: lazy rotation
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the tick goroutine returns
	once   sync.Once
}

// NewRotator builds a Rotator for cfg. With a Ticker it starts the one
// goroutine that rotates on its ticks; without one it starts nothing. An
// invalid cfg yields the core's error unchanged.
func NewRotator(cfg RotatorConfig) (*Rotator, error) {
	rc := rotator.Config{
		Sketch:      cfg.Sketch.native(newSeed()),
		Generations: cfg.Generations,
		Period:      cfg.Period,
	}
	if cfg.Ticker != nil && core.IsNil(cfg.Ticker) {
		// A typed nil is not "no Ticker": the tick goroutine's first C()
		// would crash the process (audit 140).
		return nil, core.ConfigErr("rotator", "Ticker", cfg.Ticker, "Ticker must not be a nil %T (leave it nil for lazy rotation)", cfg.Ticker)
	}
	if cfg.Ticker != nil && rc.Period < 0 {
		// The lazy rotator's rule ("> 0") is not this one's (audit 125).
		return nil, core.ConfigErr("rotator", "Period", cfg.Period, "Period must be >= 0 with a Ticker (it is unused); got %v", cfg.Period)
	}
	if cfg.Ticker != nil && rc.Period < time.Millisecond {
		rc.Period = periodWithTicker // unused: see periodWithTicker
	}
	r, err := rotator.New(rc)
	if err != nil {
		return nil, err
	}
	rot := &Rotator{r: r, e: core.RotatorOf(r), ticker: cfg.Ticker}
	if cfg.Ticker != nil {
		rot.e.SetManual() // rotation on ticks only, not on access
		rot.stop = make(chan struct{})
		rot.done = make(chan struct{})
		go rot.run()
	}
	return rot, nil
}

// run rotates once per tick until Close (or until the tick channel is
// closed).
func (rot *Rotator) run() {
	defer close(rot.done)
	ticks := rot.ticker.C()
	h, _ := rot.ticker.(tickHandler)
	for {
		select {
		case <-rot.stop:
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
			rot.e.Rotate()
			if h != nil {
				h.TickHandled()
			}
		}
	}
}

// Close stops ticker-driven rotation: it stops the goroutine, waits for it
// to return and stops the Ticker. It is idempotent, and a no-op for a lazy
// rotator. Operations keep working after Close; a ticker-driven rotator no
// longer rotates.
func (rot *Rotator) Close() {
	rot.once.Do(func() {
		if rot.ticker == nil {
			return
		}
		close(rot.stop)
		<-rot.done
		rot.ticker.Stop()
	})
}

// Rotations returns the number of rotations so far (at most MaxInt64). For a lazy rotator it
// first brings rotation up to date, as any operation does, and counts the
// periods that elapsed (a clock jump over k periods counts k, as k ticks
// would have).
func (rot *Rotator) Rotations() int64 {
	n := rot.native()
	if rot.ticker == nil {
		rot.e.Settle() // promotes if a period is over; calls no Hasher or Aggregator (audit 111)
	}
	// Saturated: a clock moved across most of the int64 ms range at a
	// 1 ms Period counts more periods than an int64 holds (audit 140).
	return int64(min(n.Stats().Periods, math.MaxInt64))
}

// Native returns the lock-free rotator underneath, for its native API.
// With a Ticker and a Period under 1 ms (0: unset), its Config reports a
// Period of 1h: the native rotator needs one, and rotating only on ticks
// never uses it.
func (rot *Rotator) Native() *rotator.Rotator { return rot.r }

// Update applies Update to every generation.
func (rot *Rotator) Update(key []byte, delta float64) { rot.native().Update(key, delta) }

// Query returns the primary generation's score for key.
func (rot *Rotator) Query(key []byte) float64 { return rot.native().Query(key) }

// UpdateAndQuery updates every generation and returns the primary's
// updated score.
func (rot *Rotator) UpdateAndQuery(key []byte, delta float64) float64 {
	return rot.native().UpdateAndQuery(key, delta)
}

// TryUpdate applies delta to every generation only if the primary's
// aggregate + delta <= limit, exactly across concurrent callers and
// rotations, and reports whether it did.
func (rot *Rotator) TryUpdate(key []byte, delta, limit float64) bool {
	return rot.native().TryUpdate(key, delta, limit)
}

// QueryDetailed returns the primary generation's per-level view of key.
func (rot *Rotator) QueryDetailed(key []byte) Result {
	return resultOf(rot.native().QueryDetailed(key))
}

// native returns the rotator underneath, or panics on the zero Rotator.
func (rot *Rotator) native() *rotator.Rotator {
	if rot.r == nil {
		panic("grudge: zero Rotator; use NewRotator")
	}
	return rot.r
}
