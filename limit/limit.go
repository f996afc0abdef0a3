package limit

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch"
)

// Limit is a rate of events per second, as golang.org/x/time/rate's
// Limit. Inf admits everything.
type Limit float64

// Inf is the infinite rate: a Limiter with it admits every request and
// keeps no state. New takes Limit(math.Inf(1)) as Inf too.
const Inf = Limit(math.MaxFloat64)

// InfDuration is the RetryAfter (and Reservation Delay) of a request that
// can never be admitted: n above the burst, or a reservation refused;
// and the RetryAfter of a denial whose wait is longer than the longest
// time.Duration (about 292 years; Never is not set).
const InfDuration = time.Duration(math.MaxInt64)

// Every converts a minimum interval between events to a Limit; a zero or
// negative interval means Inf.
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Inf
	}
	return 1 / Limit(interval.Seconds())
}

// PeriodFactor is K in the default rotation Period, K x MaxDebt /
// (rate x (Generations-1)): see the package documentation, "Rotation
// and amnesty".
const PeriodFactor = 16

// Limiter is a token bucket per key over an unbounded key space, in debt
// form, in constant memory (the package documentation has the model).
// Create one with [New]. The zero Limiter is not usable: every decision
// method panics on it with "limit: zero Limiter; use New" (its accessors
// return zero values), so a Limiter that was never built can never admit
// silently. A Limiter is safe for concurrent use by any number of
// goroutines; it starts no goroutine and never needs purging.
type Limiter struct {
	r     *core.Rotator  // the CountMin engine; nil with Buckets, for Inf (inf set) and in the zero Limiter
	b     *bucket.Engine // the Buckets engine; nil with CountMin, for Inf and in the zero Limiter
	tb    *core.Timebase // the clock's time scale; nil only in the zero Limiter
	inf   bool           // limit is Inf: admit everything, keep no state
	setMu sync.Mutex     // serializes SetLimit and SetBurst
	// p is the policy the Limiter's own methods decide with (limit,
	// burst and their units): New's, replaced whole by SetLimit and
	// SetBurst, so that a decision reads one pointer and never mixes two
	// policies. A Tier carries its own (tier.go).
	p atomic.Pointer[params]
	// The engine holds a key's debt in units (see units): one token of
	// New's limit is unit units, and a debt drains by drain units per
	// millisecond (the law is linear at 1000 x drain per second, whose
	// drop over whole milliseconds is exact: decay.Linear for CountMin,
	// whole ticks for Buckets). maxDebtU is MaxDebt in units. These are
	// the engine's base units, fixed for the limiter's life: every
	// policy (New's, SetLimit's, a Tier's) prices its tokens in them.
	unit, drain float64
	maxDebtU    float64
	// heldU is the count-min cell's clamp, maxDebtU rounded up to a
	// float32, when no float32 holds maxDebtU (else maxDebtU): a read at
	// maxDebtU (reads are capped at it) may stand for a cell holding up
	// to heldU, which drains from there (held).
	heldU      float64
	exact      bool    // New's policy is the exact rational bucket at whole ms: see Exact
	rate       float64 // float64(New's limit), > 0 and finite unless inf
	maxDebt    float64 // MaxDebt in tokens of New's limit, >= its burst
	rejectCost float64 // >= 0, <= maxDebt
	// A policy's cost per token is rounded up to what the engine stores
	// exactly (costOf): a multiple of 2^-shift units, or, when bits > 0
	// (units that are not whole: a rate that is not a short fraction on
	// the count-min), bits significant bits.
	shift, bits int
	strict      bool
	cu          bool // the count-min's conservative update: no take comes back
	// auto: built with Auto and no count-min-only option, so a limiter
	// built as this one but with another MaxDebt may run on either engine
	// (needFor prices a MaxDebtError's Need on the one Auto would pick).
	auto     bool
	name     string
	period   time.Duration
	newTimer func(time.Duration) (<-chan time.Time, func() bool) // nil: the clock cannot wait
	// realTimers: newTimer is time.NewTimer under a clock on the runtime's
	// monotonic clock (timerOf), which those timers run on outside a
	// testing/synctest bubble; waitN checks that they do.
	realTimers bool
	counts     counters // the decisions since New (a Tier's too), for Stats
}

// Option configures New.
type Option func(*options)

type options struct {
	common.Options
	strict      bool
	rejectCost  float64
	maxDebt     float64
	maxDebtSet  bool // WithMaxDebt was given
	generations uint32
	genSet      bool // WithGenerations was given
	period      time.Duration
	periodSet   bool // WithPeriod was given
	name        string
	engine      Engine
	capKeys     int
	capDeny     float64
	capSet      bool             // WithCapacity was given
	capCountMin bool             // under Auto, only the count-min holds the capacity (capacityOnlyCountMin)
	capGeom     *bucket.Geometry // bucket.Suggest's answer for the capacity, once computed (capBuckets)
	sizeSet     bool             // WithSize was given
	cu          bool             // WithConservativeUpdate(true)
}

// WithClock sets the clock (default: the sketch's monotonic clock). Every
// time the limiter reads (Now, the default t of Allow, Reservation.Delay)
// and every wait (WaitN) goes through it: a clock that implements [Clock]
// also drives WaitN's timers, so a fake one (limittest.FakeClock) makes
// waiting deterministic; with a clock that cannot wait, WaitN returns
// ErrNoTimer (the default clock waits on real timers). Inside a
// testing/synctest bubble, which fakes time.Now and time's timers but not
// the runtime's monotonic clock the default clock reads, use a clock on
// package time (limittest.TimeClock): a default-clock WaitN there returns
// ErrNoTimer once its first timer fires with the clock not moved.
func WithClock(c sketch.Clock) Option { return func(o *options) { o.Clock = c } }

// WithSeed sets the hash seed (default: 8 bytes from crypto/rand, so a
// client cannot choose keys that collide with a victim's).
func WithSeed(seed uint64) Option { return func(o *options) { o.Seed, o.Seeded = seed, true } }

// WithSize sets the count-min's levels L and cells per level M (0 keeps
// the sketch default: 4 x 100,000), and selects the CountMin engine (see
// WithEngine). Memory is about Generations x L x M x 8 bytes, whatever
// the number of keys. WithCapacity sizes either engine from a capacity
// target instead.
func WithSize(levels, cells uint32) Option {
	return func(o *options) { o.Levels, o.Cells, o.sizeSet = levels, cells, true }
}

// WithHasher sets the hash (default sketch.SipHash(), the keyed PRF;
// sketch.XXH3() is faster where keys are not chosen by an adversary).
func WithHasher(h sketch.HasherFactory) Option { return func(o *options) { o.Hasher = h } }

// WithStrict chooses the decision mode: strict (true, the default) decides
// with the sketch's TryUpdate, exact under contention; optimistic (false)
// reads then writes, and can over-admit by the number of callers racing
// on one key.
func WithStrict(strict bool) Option { return func(o *options) { o.strict = strict } }

// WithRejectCost debits c tokens of debt on every denial (default 0): a
// penalty for a client that keeps knocking. Debt never exceeds MaxDebt.
// c is held in the limiter's units as the float64 nearest to c x unit
// (the whole number within 4 ulps of it where there is one), so a
// decimal c means what it says (as WithMaxDebt's d). The Buckets engine
// holds New's policy only with a c that is then a whole number of its
// ticks (Auto picks the count-min otherwise, and WithEngine(Buckets) is
// refused; a tier's RejectCost off them makes Tier.Exact false);
// the count-min stores c rounded up to its grid (a multiple of 2^-k
// units when exact), and where that rounds each denial debits a little
// more than c and Exact reports false (New(10, 20, WithRejectCost(1e-4),
// WithEngine(CountMin)): 0.01 units). A whole number of tokens is always
// on the grid.
func WithRejectCost(c float64) Option { return func(o *options) { o.rejectCost = c } }

// WithMaxDebt sets the most debt a key can carry (the sketch's Hi;
// default 2 x burst capped at 2^24, at least burst + RejectCost). Debt above the burst
// comes from reservations queued into the future (ReserveN, WaitN) and
// from penalties; it must be >= burst and at most 2^24. It is held in
// the limiter's units (see "Exactness" in the package doc) as the
// float64 nearest to d x unit, or the whole number within 4 ulps of it
// where there is one, so a decimal d means what it says:
// WithMaxDebt(20.03) at 10/s holds 2003 units of 10 ms's drain, 20.03
// tokens, where the float64 20.03 is 1.1e-15 above that.
func WithMaxDebt(d float64) Option { return func(o *options) { o.maxDebt, o.maxDebtSet = d, true } }

// WithGenerations sets the count-min rotator's number of generations
// (default 2, at most [MaxGenerations]), and selects the CountMin engine
// (see WithEngine).
func WithGenerations(n uint32) Option { return func(o *options) { o.generations, o.genSet = n, true } }

// WithMaxBytes caps the memory of the engine's cells (default
// sketch.DefaultMaxBytes, 4 GiB): New refuses a size (Generations x L x M
// x 8 bytes for CountMin, each row of M cells rounded up to whole cache
// lines, as CountMinSize.Bytes counts it; (Lines + 1) x 64 for Buckets)
// above it with a *sketch.ConfigError instead of allocating it. A
// count-min generation also allocates three cache-line guard lines
// beside its rows, which the cap does not count and Sizes().Cells does
// (192 bytes a generation on amd64, 384 on arm64; audit 70).
func WithMaxBytes(n int64) Option { return func(o *options) { o.MaxBytes = n } }

// WithConservativeUpdate turns the count-min's conservative update on or
// off (default off), and with on selects the CountMin engine (see
// WithEngine): a request raises each of the key's cells only to the key's
// new debt instead of adding to every cell, so keys below their limit
// inflate shared cells less, and fewer fresh keys are denied on
// workloads of mixed debts (docs/capacity.md, "Conservative update",
// measures how many). Its price: a Cancel, WaitN's cancel and a Multi's
// refund give nothing back (the debit stays, on the safe side: a
// conservative cell holds the largest of its keys' debts, so no rule can
// tell whether a request's own debit still stands alone in it), and
// every request of a key takes its TryUpdate stripe.
func WithConservativeUpdate(on bool) Option { return func(o *options) { o.cu = on } }

// MaxGenerations bounds WithGenerations: every admitted request writes
// every generation, so a request costs about Generations sketch updates;
// more than 2 is rarely useful.
const MaxGenerations = 16

// WithPeriod overrides the count-min's rotation Period, and selects the
// CountMin engine (see WithEngine). New refuses a Period shorter than
// MaxDebt / (rate x (Generations-1)), which could amnesty a key that went
// silent at MaxDebt (see [PeriodFactor]), or than 1 ms; it rounds one
// with a fraction of a ms up to whole ms (1.5ms runs, and Period
// reports it, as 2ms), as the rotator counts time (down, within a ms, to
// the largest whole-ms Duration near math.MaxInt64).
func WithPeriod(p time.Duration) Option { return func(o *options) { o.period, o.periodSet = p, true } }

// WithPrefetch sets the count-min rotator's Prefetch (default true; the
// Buckets engine always prefetches its key's two lines): every Allow
// hashes the key for every generation and prefetches their cells before
// the decision, so an admission of a key whose cells are not in cache
// waits for one generation's cache misses instead of two, while a call
// on a cached key, and a denial, does a little more work. Turn it off for
// a limiter over a few hot keys (rotator.Config.Prefetch; the numbers
// are in docs/readings.md and docs/design.md).
func WithPrefetch(on bool) Option { return func(o *options) { o.NoPrefetch = !on } }

// WithName names the limiter's policy (default "default"); httplimit uses
// it in the RateLimit-Policy and RateLimit header fields.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// New returns a limiter admitting, per key, burst requests at once and
// limit requests per second sustained. An invalid argument or option is
// a *sketch.ConfigError naming it (errors.Is(err, sketch.ErrInvalidConfig)),
// prefixed "limit: ": a limit that is NaN, zero, negative or too large
// to represent (above 1e22), a burst < 1 or above 2^24, a nil Option, or
// an invalid option value.
func New(limit Limit, burst int, opts ...Option) (*Limiter, error) {
	o := options{strict: true, name: "default", generations: 2}
	for i, f := range opts {
		if f == nil {
			return nil, bad("Option", i, "option %d is nil", i)
		}
		f(&o)
	}
	if math.IsNaN(float64(limit)) || limit <= 0 {
		return nil, bad("Limit", float64(limit), "limit must be > 0 (or Inf); got %v", float64(limit))
	}
	if burst < 1 {
		return nil, bad("Burst", burst, "burst must be > 0; got %d", burst)
	}
	if burst > 1<<24 {
		return nil, bad("Burst", burst, "burst must be <= %d (exact in a float32 cell); got %d", 1<<24, burst)
	}
	burstF := float64(burst)
	if math.IsNaN(o.rejectCost) || math.IsInf(o.rejectCost, 0) || o.rejectCost < 0 {
		return nil, bad("RejectCost", o.rejectCost, "RejectCost must be finite and >= 0; got %v", o.rejectCost)
	}
	if o.name == "" {
		return nil, bad("Name", o.name, "Name must not be empty")
	}
	if o.engine > CountMin {
		return nil, bad("Engine", o.engine, "Engine must be Auto, Buckets or CountMin; got %v", o.engine)
	}
	if o.capSet {
		if err := capacityErr(o.capKeys, o.capDeny); err != nil {
			return nil, err
		}
	}
	// What does not depend on the rate is refused alike for Inf and for
	// a finite limit, so that a configuration does not fail only once its
	// rate is made finite (audit 42).
	if err := o.checkRateless(burstF); err != nil {
		return nil, err
	}
	l := &Limiter{strict: o.strict, name: o.name, tb: core.NewTimebase(o.Clock)}
	l.newTimer, l.realTimers = timerOf(o.Clock)
	if limit == Inf || math.IsInf(float64(limit), 1) {
		l.inf = true
		l.p.Store(&params{limit: Inf, burst: burst, burstF: burstF, name: o.name, exact: true})
		return l, nil
	}
	if limit > maxRate {
		return nil, bad("Limit", float64(limit), "limit must be <= %g (or Inf); got %v", maxRate, float64(limit))
	}
	l.rate = float64(limit)
	maxDebt := o.maxDebt
	if !o.maxDebtSet {
		// Twice the burst, at most 2^24 (a burst above 2^23 then gets
		// less room for RejectCost's debt), and room for one RejectCost.
		maxDebt = max(min(2*burstF, 1<<24), burstF+o.rejectCost)
	}
	if math.IsNaN(maxDebt) || math.IsInf(maxDebt, 0) || maxDebt < burstF || maxDebt > 1<<24 {
		return nil, bad("MaxDebt", maxDebt, "MaxDebt must be in [burst (%d), 2^24]; got %v", burst, maxDebt)
	}
	if o.rejectCost > maxDebt {
		return nil, bad("RejectCost", o.rejectCost, "RejectCost must be <= MaxDebt (%v); got %v", maxDebt, o.rejectCost)
	}
	l.maxDebt, l.rejectCost = maxDebt, o.rejectCost
	if o.capSet && o.engine == Auto {
		o.capCountMin = o.capacityOnlyCountMin()
	}
	unit, drain, exact, fbits := units.Units(l.rate, maxDebt)
	plan := planBuckets(l.rate, maxDebt, o.rejectCost)
	eng, err := chooseEngine(&o, l.rate, maxDebt, plan)
	if err != nil {
		return nil, err
	}
	l.auto = o.engine == Auto && !o.countMinOnly()
	if eng == Buckets {
		unit, drain, exact, fbits = plan.unit, plan.drain, plan.exact, 0
	}
	l.unit, l.drain, l.exact, l.bits = unit, drain, exact, fbits
	l.maxDebtU = heldUnits(maxDebt, l.unit) // rounded where formed, as params.cost
	l.heldU = max(l.maxDebtU, float64(atom.RoundUp(l.maxDebtU)))
	if eng != Buckets && exact {
		l.shift = gridShift(l.maxDebtU)
	}
	// Exact as reported also needs MaxDebt and RejectCost on the grid
	// the engine stores exactly: a count-min clamp off it is held at the
	// float32 above (audit 91: WithMaxDebt(20.03) at 1000/s refused a
	// reservation the rational bucket takes, Exact true).
	exactP := exact && onGrid(l.maxDebtU, l.shift) && rejectExact(o.rejectCost, l.unit, l.shift)
	l.p.Store(&params{unit: l.unit, burstU: burstF * l.unit, rejectU: heldUnits(o.rejectCost, l.unit),
		limit: limit, burst: burst, burstF: burstF, name: o.name, exact: exactP})
	if eng == Buckets {
		if err := o.Finish("limit", "Generations", 0); err != nil {
			return nil, err
		}
		if err := l.newBuckets(&o); err != nil {
			return nil, err
		}
		l.charged(l.p.Load()) // not yet shared
		return l, nil
	}
	if l.maxDebtU > math.MaxFloat32 {
		return nil, bad("MaxDebt", maxDebt, "MaxDebt / limit must be at most %g seconds of drain (a float32 cell); got %v / %v", math.MaxFloat32/1000, maxDebt, l.rate)
	}
	if o.capSet {
		g, err := bucket.SuggestCountMin(o.capKeys, o.capDeny, int(o.generations))
		if err != nil {
			return nil, bad("Capacity", o.capKeys, "%v", err)
		}
		o.Levels, o.Cells = g.Levels, g.Cells
	}
	if err := o.Finish("limit", "Generations", o.generations); err != nil {
		return nil, err
	}
	minPeriod := periodFor(l.maxDebtU, l.drain, o.generations, 1)
	period := o.period
	if !o.periodSet {
		period = periodFor(l.maxDebtU, l.drain, o.generations, PeriodFactor)
	} else if period < minPeriod {
		return nil, bad("Period", period, "Period must be >= MaxDebt/(rate x (Generations-1)) = %v; got %v", minPeriod, period)
	} else {
		// Whole ms, rounded up, as the rotator counts it, so that
		// Period() and a snapshot's header say what runs (audit 136).
		period = time.Duration(min(core.PeriodMillis(period), math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	}
	l.period = period
	sc := o.Sketch(decay.Linear(1000*l.drain), 0, l.maxDebtU, core.Min, l.tb)
	sc.Conservative = o.cu
	l.cu = o.cu
	r, err := core.NewRotator(core.RotatorConfig{
		Sketch:      sc,
		Generations: o.generations,
		Period:      period,
		Prefetch:    !o.NoPrefetch,
	})
	if err != nil {
		return nil, core.Prefixed("limit", err)
	}
	l.r, l.tb = r, r.Timebase()
	return l, nil
}

// bad returns the *sketch.ConfigError of an invalid argument or option.
func bad(field string, value any, format string, args ...any) error {
	return core.ConfigErr("limit", field, value, format, args...)
}

// MustNew is New that panics on an error; for package-level limiters.
func MustNew(limit Limit, burst int, opts ...Option) *Limiter {
	l, err := New(limit, burst, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// checkRateless refuses the options New refuses whatever the limit: both
// WithCapacity and WithSize, a negative MaxBytes, count-min options with
// WithEngine(Buckets), Generations outside 2..MaxGenerations, a
// Period under 1 ms, and an explicit MaxDebt outside [burst, 2^24]. New checks these for every
// limit; New(Inf, ...) checks nothing else (the rest depends on the
// rate), and a finite limit checks its effective MaxDebt again once the
// default is filled in.
func (o *options) checkRateless(burst float64) error {
	if o.capSet && o.sizeSet {
		return bad("Capacity", o.capKeys, "WithCapacity and WithSize both size the engine; give one")
	}
	if o.Clock != nil && core.IsNil(o.Clock) {
		// As package sketch refuses it (audit 140): not the default clock,
		// and a nil dereference at its first reading.
		return bad("Clock", o.Clock, "WithClock must not be given a nil %T (leave it out for the default clock)", o.Clock)
	}
	if o.MaxBytes < 0 {
		return bad("MaxBytes", o.MaxBytes, "MaxBytes must be >= 0 (0 means %d); got %d", int64(core.DefaultMaxBytes), o.MaxBytes)
	}
	if o.engine == Buckets && (o.sizeSet || o.genSet || o.periodSet || o.cu) {
		return bad("Engine", o.engine, "WithSize, WithGenerations, WithPeriod and WithConservativeUpdate configure the count-min; they cannot be used with WithEngine(Buckets)")
	}
	if o.generations < 2 || o.generations > MaxGenerations {
		return bad("Generations", o.generations, "Generations must be in 2..%d; got %d", MaxGenerations, o.generations)
	}
	if o.periodSet && o.period < time.Millisecond {
		// Every finite rate's least Period is at least 1 ms: refused for
		// Inf too, so a configuration does not fail only once its rate is
		// made finite (audit 133).
		return bad("Period", o.period, "Period must be >= 1ms (and >= MaxDebt/(rate x (Generations-1)) for a finite rate); got %v", o.period)
	}
	if m := o.maxDebt; o.maxDebtSet && (math.IsNaN(m) || math.IsInf(m, 0) || m < burst || m > 1<<24) {
		return bad("MaxDebt", m, "MaxDebt must be in [burst (%v), 2^24]; got %v", burst, m)
	}
	return nil
}

// periodFor returns k x the drain time of debtU units, over gens-1
// generations, rounded up to the millisecond: k x debtU / (drain x
// (gens-1)) ms, at least 1 ms, at most about 290 years.
func periodFor(debtU, drain float64, gens uint32, k float64) time.Duration {
	ms := math.Ceil(k * debtU / (drain * float64(gens-1)))
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond
	}
	return time.Duration(max(ms, 1)) * time.Millisecond
}

// Limit returns the sustained rate: New's, or the last SetLimit's (0
// for the zero Limiter).
func (l *Limiter) Limit() Limit {
	if p := l.p.Load(); p != nil {
		return p.limit
	}
	return 0
}

// Burst returns the burst, the most a key is admitted at once: New's, or
// the last SetBurst's (0 for the zero Limiter).
func (l *Limiter) Burst() int {
	if p := l.p.Load(); p != nil {
		return p.burst
	}
	return 0
}

// Name returns the policy name (WithName).
func (l *Limiter) Name() string { return l.name }

// MaxDebt returns the most debt a key can carry (0 for Inf), in tokens
// of New's limit (WithMaxDebt): a SetLimit or a Tier prices its tokens
// differently, but the debt a key can carry, in time to drain, stays
// MaxDebt / New's limit.
func (l *Limiter) MaxDebt() float64 { return l.maxDebt }

// Period returns the count-min's rotation Period (0 for Inf and for the
// Buckets engine, which does not rotate).
func (l *Limiter) Period() time.Duration { return l.period }

// Sizes returns the memory the limiter holds: constant, whatever the
// number of keys. For the Buckets engine Cells is its lines (with one
// line of alignment slack) and Total adds its struct.
func (l *Limiter) Sizes() sketch.Sizes {
	if l.b != nil {
		return sketch.Sizes{Cells: (l.b.Lines() + 1) * bucket.LineBytes, Total: l.b.Bytes()}
	}
	if l.r == nil {
		return sketch.Sizes{}
	}
	return sketch.Sizes(l.r.Sizes())
}

// Now returns the limiter clock's current reading as a time.Time, for the
// full forms (AllowN, DecideN, ...). It panics on the zero Limiter. After
// a clock (WithClock) stepped back it is that earlier reading: the
// limiter still decides at the latest time it has used (time never runs
// back for a key), and the waits it answers for Now count from Now,
// longer by the lag, as for any stale t.
func (l *Limiter) Now() time.Time {
	if l.tb == nil {
		panic(errZero)
	}
	return l.tb.Time(l.tb.Reading())
}

// errZero is the panic of every decision method of the zero Limiter.
const errZero = "limit: zero Limiter; use New"

// none reports whether l has no engine: Inf, or the zero Limiter.
func (l *Limiter) none() bool { return l.r == nil && l.b == nil }

// unset answers a call on a Limiter without an engine: true (admit) for
// Inf; a panic for the zero Limiter. Kept out of line so that the nil
// check it follows stays the hot paths' only cost.
//
//go:noinline
func (l *Limiter) unset() bool {
	if !l.inf {
		panic(errZero)
	}
	return true
}

// checkN panics on n <= 0: a request of no tokens is a programmer error.
func checkN(op string, n int) {
	if n <= 0 {
		panic(fmt.Sprintf("limit: %s: n must be > 0; got %d", op, n))
	}
}

// Allow reports whether one request for key is admitted now, and if so
// debits it: AllowN at the clock's reading with n = 1. It does not
// allocate (on the Buckets engine, but for one 16-byte allocation by the
// first eviction after every 2^28 floor epochs, 97 days for New(10, 20)
// and seconds for a rate of millions a second with a tiny burst, and
// the first after a ReadFrom: internal/bucket's Engine).
func (l *Limiter) Allow(key string) bool { return l.allow(l.p.Load(), key) }

// allow is Allow under the policy p (the Limiter's or a Tier's),
// counted for Stats.
func (l *Limiter) allow(p *params, key string) bool {
	ok := l.admit(p, key)
	l.counts.count(ok)
	return ok
}

// admit is allow without the count.
func (l *Limiter) admit(p *params, key string) bool {
	if b := l.b; b != nil {
		if l.strict {
			if b.TryCharge(key, p.allowC) {
				return true
			}
		} else if b.Query(key)+p.unit <= p.burstU {
			b.AddCharge(key, p.allowC)
			return true
		}
		if p.rejectU > 0 {
			b.AddCharge(key, p.rejectC)
		}
		return false
	}
	if l.r == nil {
		return l.unset()
	}
	if l.strict {
		if l.r.TryUpdateString(key, p.unit, p.burstU) {
			return true
		}
	} else if l.r.QueryString(key)+p.unit <= p.burstU {
		l.r.UpdateString(key, p.unit)
		return true
	}
	if p.rejectU > 0 {
		l.r.UpdateString(key, p.rejectU)
	}
	return false
}

// AllowN reports whether n requests for key are admitted at time t, and
// if so debits them. It panics if n <= 0. A t before a time already used
// counts as that time, and a t after the clock's reading counts as that
// reading (the one deviation from x/time/rate). It does not allocate.
func (l *Limiter) AllowN(t time.Time, key string, n int) bool {
	return l.allowN(l.p.Load(), t, key, n)
}

// allowN is AllowN under the policy p, counted for Stats.
func (l *Limiter) allowN(p *params, t time.Time, key string, n int) bool {
	checkN("AllowN", n)
	ok := l.admitN(p, t, key, n)
	l.counts.count(ok)
	return ok
}

// admitN is allowN without the check of n and the count.
func (l *Limiter) admitN(p *params, t time.Time, key string, n int) bool {
	if l.none() {
		return l.unset()
	}
	// n above the burst never fits: no decision to make, but the denial
	// still pays RejectCost, as DecideN's does.
	fits := n <= p.burst
	nU := p.cost(float64(n))
	if b := l.b; b != nil {
		switch {
		case !fits:
		case l.strict && n == 1: // nU is p.unit: the policy's Charge
			if b.TryChargeAt(t, key, p.allowC) {
				return true
			}
		case l.strict:
			if b.TryUpdateAt(t, key, nU, p.burstU) {
				return true
			}
		case b.QueryAt(t, key)+nU <= p.burstU:
			b.UpdateAt(t, key, nU)
			return true
		}
		if p.rejectU > 0 {
			b.AddChargeAt(t, key, p.rejectC)
		}
		return false
	}
	switch {
	case !fits:
	case l.strict:
		if l.r.TryUpdateStringAt(t, key, nU, p.burstU) {
			return true
		}
	case l.r.QueryStringAt(t, key)+nU <= p.burstU:
		l.r.UpdateStringAt(t, key, nU)
		return true
	}
	if p.rejectU > 0 {
		l.r.UpdateStringAt(t, key, p.rejectU)
	}
	return false
}
