package meter

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
)

// Novelty answers "was this key seen within the last T?" in constant
// memory: a Bloom filter that forgets, for streaming dedup. Create one
// with NewNovelty; the zero Novelty is not usable (its methods panic with
// "meter: zero Novelty; use NewNovelty"). Safe for concurrent
// use; Seen and Contains (and their At forms) do not allocate, but for
// the call that builds a new generation, once per Period (WriteTo and
// ReadFrom do).
//
// Model: each of the key's L cells is a saturating latch, Hi = 1, that
// decays as exp(-t/T'), T' being T rounded up to a whole millisecond.
// Marking a key sets its cells to 1; the key counts as seen while the
// Min of its cells is above the threshold theta = exp(-1), which the
// key's own mark stays above for exactly T' of the clock's whole
// milliseconds. Times count in whole milliseconds (a time within one is
// that millisecond), so two times less than T apart are less than T'+1
// whole milliseconds apart, at most T': errors are one-sided, as a
// Bloom filter's: no false negatives within T (a mark may last a little
// longer: float32 rounding is upward, by up to T x 2^-23 for each
// periodic sweep of its cells (every 2^29 to 2^30 ms, package sketch)
// since the mark, measured 1 min 26 s past T' for T = 400 days, 1 h 52
// min for 10 years; and up to T' + 1 ms for a T that
// is not whole milliseconds; audit 68: T = 1.5 ms forgot a mark 1.499999
// ms after it when the law was exp(-t/T)); a false
// positive needs all L cells refreshed within T by other keys
// ((1 - (1 - 1/M)^n)^L for n keys seen per T in L levels of M cells,
// plus about n/M^2 for a key that shares every level with one other:
// the double hashing of the cell indices), or a Seen whose commit meets
// another key's write and spans a horizon sweep of its cells, a clock
// step or stall of days inside one call (docs/design.md, "Roll-backs"). With
// rotation (Period = 16 T by default, at least T) a generation becomes
// the primary (Generations-1) x Period >= T after its creation, so the
// marks it missed are older than T anyway: rotation adds no false
// negative. A Seen whose time is past a rotation deadline while another
// call builds the new generation waits for it and marks it too (package
// rotator, "Operations during a promotion").
//
// Seen is exact under contention: of N goroutines racing Seen on a key
// not seen within T, exactly one is told it is new. It decides with the
// sketch's TryUpdate, which marks in the same step (admit, meaning new,
// iff Min <= theta, adding 1 under the limit 1+theta, clamped to 1); a
// key seen is refreshed by saturating its cells to 1 (every sighting
// refreshes the mark). One decision: a racer reads the winner's mark.
type Novelty struct {
	r     *core.Rotator
	theta float64
	t     time.Duration
}

// NewNovelty returns a Novelty remembering keys for within (>= 1 ms, and
// within x PeriodWindows at most 2^62 ns, about 146 years). A
// shorter or longer duration, a nil or invalid option, or a size above
// MaxBytes is a *sketch.ConfigError prefixed "meter: " (errors.Is(err,
// sketch.ErrInvalidConfig)).
func NewNovelty(within time.Duration, opts ...Option) (*Novelty, error) {
	if within < time.Millisecond {
		return nil, bad("Window", within, "Novelty window must be >= 1ms; got %v", within)
	}
	o, err := collect(opts, core.DefaultGenerations)
	if err != nil {
		return nil, err
	}
	if !(o.periods >= 1) {
		return nil, bad("PeriodWindows", o.periods, "PeriodWindows must be >= 1; got %v", o.periods)
	}
	if err := checkPeriod(within, o.periods); err != nil {
		return nil, err
	}
	sc := o.Sketch(decay.Exponential(1/wholeMs(within).Seconds()), 0, 1, core.Min, o.Clock)
	sc.FinalAdmission = true // a first sighting stays one (audit 109)
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch:   sc,
		Prefetch: !o.NoPrefetch,
		Period:   periodOf(within, o.periods),
	})
	if err != nil {
		return nil, core.Prefixed("meter", err)
	}
	return &Novelty{r: r, theta: math.Exp(-1), t: within}, nil
}

// Within returns T.
func (n *Novelty) Within() time.Duration { n.rot(); return n.t }

// Seen reports whether key was marked within the last T, and marks it
// now either way.
func (n *Novelty) Seen(key string) bool { return n.seenAt(nil, key) }

// SeenAt is Seen at time t.
func (n *Novelty) SeenAt(t time.Time, key string) bool { return n.seenAt(&t, key) }

func (n *Novelty) seenAt(t *time.Time, key string) bool {
	// New when the mark is at most theta: admitted with the limit
	// 1 + theta, and then marked in the same step, saturated to 1
	// (clamped at Hi), from which the mark stays above theta for exactly
	// T. One decision, so exactly one of racing callers is told new (a
	// mark of 1 - theta, refreshed by a second call, could decay back to
	// theta between the two when time passed: audit23).
	var fresh bool
	if t == nil {
		fresh = n.rot().TryUpdateString(key, 1, 1+n.theta)
	} else {
		fresh = n.rot().TryUpdateStringAt(*t, key, 1, 1+n.theta)
	}
	if !fresh { // seen: refresh the mark
		if t == nil {
			n.rot().UpdateString(key, 1)
		} else {
			n.rot().UpdateStringAt(*t, key, 1)
		}
	}
	return !fresh
}

// Contains reports whether key was marked within the last T, without
// marking it: it only reads.
func (n *Novelty) Contains(key string) bool { return n.rot().QueryString(key) > n.theta }

// ContainsAt is Contains at time t.
func (n *Novelty) ContainsAt(t time.Time, key string) bool {
	return n.rot().QueryStringAt(t, key) > n.theta
}

// rot returns n's rotator, or panics on the zero Novelty.
func (n *Novelty) rot() *core.Rotator {
	if n.r == nil {
		panic("meter: zero Novelty; use NewNovelty")
	}
	return n.r
}
