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
// The float32 rounding grows with the window: each millisecond in which
// a key is written rounds its decayed count up by up to one float32
// step (2^-24 to 2^-23 of it), against a decay of 1/window_ms of it, so
// a key written every millisecond reads high by up to about window_ms x
// 2^-23 of its count: 0.2% at 1 minute, 2% at 10 minutes, up to 16% at
// 1 hour (measured). Past about 2^24 events per window (5,000 a second
// on a 1-hour window) each +1 rounds up by 2 or more and the count runs
// away toward the clamp (67% high after three windows at 5,000 a
// second, thousands of times after six at 10,000). docs/precision.md,
// "meter.Rate: long windows and hot keys", has the measurements; for
// such keys use a shorter window, or observe in batches (ObserveAt with
// n > 1 takes the rounding once per batch).
type Rate struct {
	r      *core.Rotator
	window time.Duration
	perSec float64 // 1/window in seconds: the estimate is C*perSec
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
	return &Rate{r: r, window: window, perSec: lambda}, nil
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
	r.rot().UpdateStringAt(t, key, n)
}

// PerSecond returns the key's estimated events per second now.
func (r *Rate) PerSecond(key string) float64 { return r.rot().QueryString(key) * r.perSec }

// PerSecondAt returns the key's estimated events per second at t.
func (r *Rate) PerSecondAt(t time.Time, key string) float64 {
	return r.rot().QueryStringAt(t, key) * r.perSec
}

// rot returns r's rotator, or panics on the zero Rate.
func (r *Rate) rot() *core.Rotator {
	if r.r == nil {
		panic("meter: zero Rate; use NewRate")
	}
	return r.r
}
