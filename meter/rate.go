package meter

import (
	"fmt"
	"math"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
)

// Rate estimates events per second per key from an exponentially decayed
// counter, as pingora-limits' Rate does with two swapped estimators, in
// constant memory. Create one with NewRate; the zero Rate is not usable
// (its methods panic with "meter: zero Rate; use NewRate").
// Safe for concurrent use; Observe and Rate do not allocate.
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
// the steady-state count.
type Rate struct {
	r      *core.Rotator
	window time.Duration
	perSec float64 // 1/window in seconds: the estimate is C*perSec
}

// NewRate returns a Rate with the given averaging window (>= 1 ms). A
// shorter window, a nil or invalid option, or a size above MaxBytes is a
// *sketch.ConfigError prefixed "meter: " (errors.Is(err,
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
	lambda := 1 / window.Seconds()
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch: core.Config{
			Levels: o.levels, CellsPerLevel: o.cells,
			Decay: decay.Exponential(lambda), Lo: 0, Hi: math.MaxFloat32,
			Hasher: conv.Hasher(o.hasher), Seed: o.seed, Clock: o.clock, MaxBytes: o.maxBytes,
		},
		Prefetch: !o.noPrefetch,
		Period:   periodOf(window, o.periods),
	})
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	return &Rate{r: r, window: window, perSec: lambda}, nil
}

// Window returns the averaging window.
func (r *Rate) Window() time.Duration { return r.window }

// Observe counts one event of key now.
func (r *Rate) Observe(key []byte) { r.rot().UpdateString(bytesView(key), 1) }

// ObserveString is Observe for a string key.
func (r *Rate) ObserveString(key string) { r.rot().UpdateString(key, 1) }

// ObserveNAt counts n events (n >= 0, finite; bytes, cost) of key at t.
// It panics, with a message that starts "meter:", on a negative or
// non-finite n.
func (r *Rate) ObserveNAt(t time.Time, key string, n float64) {
	if !(n >= 0) || math.IsInf(n, 1) {
		panic(fmt.Sprintf("meter: Rate.ObserveNAt: n must be finite and >= 0; got %v", n))
	}
	r.rot().UpdateStringAt(t, key, n)
}

// Rate returns the key's estimated events per second now.
func (r *Rate) Rate(key []byte) float64 { return r.rot().QueryString(bytesView(key)) * r.perSec }

// RateString is Rate for a string key.
func (r *Rate) RateString(key string) float64 { return r.rot().QueryString(key) * r.perSec }

// RateAt returns the key's estimated events per second at t.
func (r *Rate) RateAt(t time.Time, key string) float64 {
	return r.rot().QueryStringAt(t, key) * r.perSec
}

// ObserveAndRate counts one event of key now and returns the estimate
// including it, in one pass over the cells.
func (r *Rate) ObserveAndRate(key string) float64 {
	return r.rot().UpdateAndQueryString(key, 1) * r.perSec
}

// rot returns r's rotator, or panics on the zero Rate.
func (r *Rate) rot() *core.Rotator {
	if r.r == nil {
		panic("meter: zero Rate; use NewRate")
	}
	return r.r
}
