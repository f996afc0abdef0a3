package meter

import (
	"fmt"
	"math"
	"math/bits"
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
// The float32 rounding grows with the window. Each rounding stores the
// key's count up to one float32 step high (2^-24 to 2^-23 of it), and
// that excess then decays with the count. A rounding comes with the
// first write of each millisecond (it stores the decayed count), with
// every write whose sum no float32 holds (a fractional n; a +1 on a
// count past 2^24, or carrying a decayed, fractional count past a power
// of two), and with each periodic sweep of the key's cells (every 2^29
// to 2^30 ms). A step is of the count as stored, earlier excess
// included: each rounding since a part of the count came adds up to
// 2^-23 of that part as stored, its own excess included (an exact add
// later, a whole batch, adds none). Written once every millisecond at a
// steady or rising rate, the excess is at most window_ms x 2^-23 of what
// the key reads: 0.7% at 1 minute, 7% at 10 minutes, 43% at 1 hour (75%
// above the truth); measured 0.2%, 2% and 16% for a rate rising from 0. While the count falls after a burst,
// the burst's part carries every rounding since: measured 0.4% after
// three 1-minute windows, 4% after one 10-minute window, 27% after one
// 1-hour window and 50% later. Where window_ms x 2^-23 nears 1 (2^23 ms
// is 2.3 hours) a key written every millisecond may not decay at all,
// and past about 2^24 events per window (5,000 a second on a 1-hour
// window) each +1 rounds up by 2 or more and the count runs away toward
// the clamp (67% high after three windows at 5,000 a second, thousands
// of times after six at 10,000). An ObserveAt of n = 0 writes nothing
// (it reads). docs/precision.md, "meter.Rate: long windows and hot
// keys", has the measurements; for such keys use a shorter window, or
// observe in batches (ObserveAt with n > 1 takes the rounding once per
// batch).
//
// PerSecond is C/window rounded up (never below the exact quotient of
// the count read).
type Rate struct {
	r      *core.Rotator
	window time.Duration
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
		return nil, core.Prefixed("meter", err)
	}
	return &Rate{r: r, window: window}, nil
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
// float64 not below c x 1e9 / window_ns.
func (r *Rate) perSecond(c float64) float64 {
	if !(c > 0) || math.IsInf(c, 1) {
		return c // 0 (a key never seen), or what a cell cannot hold
	}
	return ceilQuotient(c, uint64(r.window))
}

// ceilQuotient returns the least float64 not below c x 1e9 / n, for a
// finite c > 0 and 2^19 < n < 2^63, by integer division: no rounding but
// the last one, upward.
func ceilQuotient(c float64, n uint64) float64 {
	f, e := math.Frexp(c)          // c = f x 2^e, f in [0.5, 1)
	m := uint64(math.Ldexp(f, 53)) // c = m x 2^(e-53), 2^52 <= m < 2^53
	hi, lo := bits.Mul64(m, 1e9)   // below 2^83: hi < 2^19 < n
	q1, rem := bits.Div64(hi, lo, n)
	q2, rem := bits.Div64(rem, 0, n)
	// c x 1e9 / n = (q1 + q2/2^64 + rem/(n x 2^64)) x 2^(e-53), and
	// q1 >= 2^81/2^63: keep the quotient's leading 53 bits, and round up
	// on any nonzero bit below them.
	k := bits.Len64(q1)
	var top uint64
	var sticky bool
	shift := k - 53 // top x 2^shift is the quotient truncated
	if shift >= 0 {
		top = q1 >> shift
		sticky = q1&(1<<shift-1) != 0 || q2 != 0 || rem != 0
	} else {
		top = q1<<-shift | q2>>(64+shift)
		sticky = q2<<-shift != 0 || rem != 0
	}
	if sticky {
		top++ // at most 2^53: still exact
	}
	exp := shift + e - 53
	q := math.Ldexp(float64(top), exp)
	if math.Ldexp(q, -exp) < float64(top) {
		q = math.Nextafter(q, math.Inf(1)) // a subnormal q rounded down
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
