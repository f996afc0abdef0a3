package meter

import (
	"fmt"
	"math"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
)

// Rate estimates events per second per key from an exponentially decayed
// counter, as pingora-limits' Rate does with two swapped estimators, in
// constant memory. Create one with NewRate; the zero Rate is not usable
// (its methods panic with "meter: zero Rate; use NewRate").
// Safe for concurrent use; Observe and PerSecond do not allocate, but
// for the call that builds a new generation, once per Period.
//
// Each event adds 1 (or n) to the key's counter C, which decays as
// exp(-t/window). The estimate is C/window. For a constant rate rho
// since time s ago it reads rho x (1 - exp(-s/window)): a startup
// transient that is 63% after one window, 95% after three; at steady
// state it is unbiased for the counter's own arithmetic. For a varying
// rate it is the exponentially weighted average of the past rate, with
// time constant (mean lag) window. Its relative noise for Poisson events
// is about 1/sqrt(2 x rho x window). The sketch only errs upward:
// collisions (Min of L cells) and float32 rounding (up) can raise an
// estimate, never lower it, except the rotation term: a generation
// becomes the primary after it has counted for (Generations-1) x Period
// = 16 windows by default, so it misses a fraction exp(-16) (1e-7) of
// the steady-state count. Times count in whole milliseconds, as
// grudge's do: an event and a read are each taken at the millisecond
// they fall in, so the decay between them may count up to 1 ms more
// than elapsed (a factor down to exp(-1 ms/window): 0.999 for a 1 s
// window, 0.37 for 1 ms; audit 68). The exactness above is of those
// whole-millisecond times.
//
// The float32 rounding grows with the window: the first write of each
// millisecond stores the key's decayed count rounded up by up to one
// float32 step (2^-24 to 2^-23 of it), and that rounding then decays
// with the count. So each part of a count carries up to 2^-23 of itself
// for every millisecond the key was written since that part came: a key
// reads high by up to 2^-23 x the written milliseconds since its events,
// averaged over the count they left. At a steady or rising rate,
// written every millisecond, that is window_ms x 2^-23 (0.7% at 1
// minute, 7% at 10 minutes, 43% at 1 hour; measured 0.2%, 2% and 16%
// for a rate rising from 0); a burst's part carries every written
// millisecond since the burst, so a key still written every millisecond
// as its count falls reads higher than at a steady rate (measured 0.4%,
// 4% and 27% one to three windows after a burst, at 1 event a ms). An
// ObserveAt of n = 0 writes nothing (it reads). Past about 2^24 events per
// window (5,000 a second on a 1-hour window) each +1 rounds up by 2 or
// more and the count runs away toward the clamp (67% high after three
// windows at 5,000 a second, thousands of times after six at 10,000).
// docs/precision.md, "meter.Rate: long windows and hot keys", has the
// measurements; for such keys use a shorter window, or observe in
// batches (ObserveAt with n > 1 takes the rounding once per batch).
//
// PerSecond is C/window rounded up (never below the exact quotient of
// the count read).
type Rate struct {
	r      *core.Rotator
	window time.Duration
	ns     float64 // window in ns, rounded down: C*1e9/ns >= C/window
}

// NewRate returns a Rate with the given averaging window (>= 1 ms, and
// window x PeriodWindows at most 2^62 ns, about 146 years). A
// shorter or longer window, a nil or invalid option, or a size above
// MaxBytes is a *sketch.ConfigError prefixed "meter: " (errors.Is(err,
// sketch.ErrInvalidConfig)).
func NewRate(window time.Duration, opts ...Option) (*Rate, error) {
	if window < time.Millisecond {
		return nil, bad("Window", window, "Rate window must be >= 1ms; got %v", window)
	}
	o, err := collect(opts, core.DefaultGenerations)
	if err != nil {
		return nil, err
	}
	if !(o.periods >= 1) {
		return nil, bad("PeriodWindows", o.periods, "PeriodWindows must be >= 1; got %v", o.periods)
	}
	if err := checkPeriod(window, o.periods); err != nil {
		return nil, err
	}
	lambda := 1 / window.Seconds()
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch:   o.Sketch(decay.Exponential(lambda), 0, math.MaxFloat32, core.Min, o.Clock),
		Prefetch: !o.NoPrefetch,
		Period:   periodOf(window, o.periods),
	})
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	ns := float64(window)
	if time.Duration(ns) > window { // above 2^53 ns (104 days): rounded up
		ns = math.Nextafter(ns, 0)
	}
	return &Rate{r: r, window: window, ns: ns}, nil
}

// Window returns the averaging window.
func (r *Rate) Window() time.Duration { r.rot(); return r.window }

// Observe counts one event of key now.
func (r *Rate) Observe(key string) { r.rot().UpdateString(key, 1) }

// ObserveAt counts n events (0 <= n <= MaxFloat32: bytes, cost) of key
// at t. It panics, with a message that starts "meter:", on a negative,
// non-finite or larger n. A key's decayed count saturates at MaxFloat32
// (3.4e38, a cell's float32 range).
func (r *Rate) ObserveAt(t time.Time, key string, n float64) {
	if !(n >= 0 && n <= math.MaxFloat32) {
		panic(fmt.Sprintf("meter: Rate.ObserveAt: n must be in [0, MaxFloat32]; got %v", n))
	}
	if n == 0 {
		// A write of 0 would only re-stamp the key's cells with their
		// decayed counts, each rounded up: a key seeing requests of 0
		// bytes every millisecond would keep that rounding from
		// decaying. A read takes t (the time base, rotation) alike.
		r.rot().QueryStringAt(t, key)
		return
	}
	r.rot().UpdateStringAt(t, key, n)
}

// PerSecond returns the key's estimated events per second now.
func (r *Rate) PerSecond(key string) float64 { return r.perSecond(r.rot().QueryString(key)) }

// PerSecondAt returns the key's estimated events per second at t.
func (r *Rate) PerSecondAt(t time.Time, key string) float64 {
	return r.perSecond(r.rot().QueryStringAt(t, key))
}

// perSecond returns c/window in events per second, rounded up: the least
// float64 not below c x 1e9 / r.ns.
func (r *Rate) perSecond(c float64) float64 {
	p := c * 1e9
	switch {
	case math.IsInf(p, 0) || c == 0:
		return p
	case c < 0x1p-900:
		// The remainders below could underflow; two roundings of a
		// quotient this small are less than one of its steps apart.
		return math.Nextafter(p/r.ns, math.Inf(1))
	}
	lo := math.FMA(c, 1e9, -p) // c x 1e9 = p + lo exactly
	q := p / r.ns
	// q x ns - p is exact (FMA; the remainder of a rounded quotient is a
	// float64); q is below the quotient where it is below lo.
	for math.FMA(q, r.ns, -p) < lo {
		q = math.Nextafter(q, math.Inf(1))
	}
	return q
}

// rot returns r's rotator, or panics on the zero Rate.
func (r *Rate) rot() *core.Rotator {
	if r.r == nil {
		panic("meter: zero Rate; use NewRate")
	}
	return r.r
}
