package sketch_test

// Mutant Scorers for the mutation audit of sketchtest.TestScorer (see
// audit3_mut_suite_test.go). Each mutant wraps a correct *sketch.Sketch
// and breaks exactly one promise of API.md's sketch section (or of
// package sketch's documented guarantees, which TestScorer's doc says it
// checks); everything else it forwards. Mutants keep the NaN/Inf promise
// by handing non-finite inputs to the wrapped sketch, which panics before
// touching a cell, and use only atomics and mutexes, so that the race
// detector cannot be what fails a child run.

import (
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a3mSink keeps deliberate allocations alive (an atomic so that
// concurrent writers are not a data race).
var a3mSink atomic.Pointer[[]byte]

func a3mFinite(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func a3mNew(t testing.TB, cfg sketch.Config) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatalf("sketch.New(%+v): %v", cfg, err)
	}
	return s
}

// a3mFwd forwards the nine Scorer methods (and only those: no At forms).
type a3mFwd struct{ s *sketch.Sketch }

func (f a3mFwd) Update(k []byte, d float64)                 { f.s.Update(k, d) }
func (f a3mFwd) Query(k []byte) float64                     { return f.s.Query(k) }
func (f a3mFwd) UpdateAndQuery(k []byte, d float64) float64 { return f.s.UpdateAndQuery(k, d) }
func (f a3mFwd) TryUpdate(k []byte, d, l float64) bool      { return f.s.TryUpdate(k, d, l) }
func (f a3mFwd) QueryDetailed(k []byte) sketch.Detail       { return f.s.QueryDetailed(k) }
func (f a3mFwd) UpdateString(k string, d float64)           { f.s.UpdateString(k, d) }
func (f a3mFwd) QueryString(k string) float64               { return f.s.QueryString(k) }
func (f a3mFwd) UpdateAndQueryString(k string, d float64) float64 {
	return f.s.UpdateAndQueryString(k, d)
}
func (f a3mFwd) TryUpdateString(k string, d, l float64) bool { return f.s.TryUpdateString(k, d, l) }

func a3mIdentity(t testing.TB, cfg sketch.Config) sketch.Scorer { return a3mFwd{a3mNew(t, cfg)} }

// ---- reads mapped through f (under-estimation, clamps, saturation) ----

type a3mReadMap struct {
	a3mFwd
	f func(float64) float64
}

func (m a3mReadMap) Query(k []byte) float64       { return m.f(m.s.Query(k)) }
func (m a3mReadMap) QueryString(k string) float64 { return m.f(m.s.QueryString(k)) }
func (m a3mReadMap) UpdateAndQuery(k []byte, d float64) float64 {
	return m.f(m.s.UpdateAndQuery(k, d))
}
func (m a3mReadMap) UpdateAndQueryString(k string, d float64) float64 {
	return m.f(m.s.UpdateAndQueryString(k, d))
}
func (m a3mReadMap) QueryDetailed(k []byte) sketch.Detail {
	d := m.s.QueryDetailed(k)
	d.Score = m.f(d.Score)
	for i := range d.Levels {
		d.Levels[i].Score = m.f(d.Levels[i].Score)
	}
	return d
}

// Every read 1% low.
func a3mQueryLow1pct(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mReadMap{a3mFwd{a3mNew(t, cfg)}, func(v float64) float64 { return v * 0.99 }}
}

// With Hi = +Inf, a saturated score reads +Inf instead of MaxFloat32.
func a3mHiInfReadsInf(t testing.TB, cfg sketch.Config) sketch.Scorer {
	inf := math.IsInf(cfg.Hi, 1)
	return a3mReadMap{a3mFwd{a3mNew(t, cfg)}, func(v float64) float64 {
		if inf && v >= math.MaxFloat32 {
			return math.Inf(1)
		}
		return v
	}}
}

// A Hi that no float32 holds reads back as its float32 round-up (not
// capped at Hi).
func a3mHiInexactAbove(t testing.TB, cfg sketch.Config) sketch.Scorer {
	hi := cfg.Hi
	up := hi
	if f := float32(hi); !math.IsInf(hi, 0) {
		if float64(f) < hi {
			f = math.Nextafter32(f, float32(math.Inf(1)))
		}
		up = float64(f)
	}
	return a3mReadMap{a3mFwd{a3mNew(t, cfg)}, func(v float64) float64 {
		if v == hi {
			return up
		}
		return v
	}}
}

// The clamp applied on reads only: the cells store unclamped sums.
func a3mClampOnReadOnly(t testing.TB, cfg sketch.Config) sketch.Scorer {
	lo, hi := cfg.Lo, cfg.Hi
	inner := cfg
	inner.Lo, inner.Hi = lo-1e12, hi+1e12
	return a3mReadMap{a3mFwd{a3mNew(t, inner)}, func(v float64) float64 { return min(max(v, lo), hi) }}
}

// Hi not applied: the cells clamp at 2 Hi.
func a3mHiNotClamped(t testing.TB, cfg sketch.Config) sketch.Scorer {
	if !math.IsInf(cfg.Hi, 0) && cfg.Hi > 0 {
		cfg.Hi *= 2
	}
	return a3mFwd{a3mNew(t, cfg)}
}

// ---- decay law mutants (the sketch runs the mutated law as a custom law) ----

type a3mLaw struct {
	inner decay.Decay
	f     func(inner decay.Decay, s float64, dt int64) float64
}

func (l a3mLaw) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return l.f(l.inner, s, dt)
}

func a3mWithLaw(f func(inner decay.Decay, s float64, dt int64) float64) sketchtest.Factory {
	return func(t testing.TB, cfg sketch.Config) sketch.Scorer {
		if cfg.Decay == nil {
			cfg.Decay = decay.None()
		}
		cfg.Decay = a3mLaw{cfg.Decay, f}
		return a3mFwd{a3mNew(t, cfg)}
	}
}

// Each decay step rounds its result down to float32 (toward zero).
var a3mDecayRoundsDown = a3mWithLaw(func(in decay.Decay, s float64, dt int64) float64 {
	v := in.Apply(s, dt)
	f := float32(v)
	if math.Abs(float64(f)) > math.Abs(v) {
		f = math.Nextafter32(f, 0)
	}
	return float64(f)
})

// Off by one: every decay step decays one millisecond too many.
var a3mDecayExtraMs = a3mWithLaw(func(in decay.Decay, s float64, dt int64) float64 { return in.Apply(s, dt+1) })

// Linear decay not applied at all.
func a3mLinearNoDecay(t testing.TB, cfg sketch.Config) sketch.Scorer {
	if cfg.Decay != nil && reflect.TypeOf(cfg.Decay) == reflect.TypeOf(decay.Linear(1)) {
		cfg.Decay = decay.None()
	}
	return a3mFwd{a3mNew(t, cfg)}
}

// ---- TryUpdate mutants ----

// TryUpdate is Query, then Update (not atomic); the yield widens the window.
type a3mTryNotAtomic struct{ a3mFwd }

func (m a3mTryNotAtomic) TryUpdate(k []byte, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdate(k, d, l)
	}
	if m.s.Query(k)+d > l {
		return false
	}
	runtime.Gosched()
	m.s.Update(k, d)
	return true
}

func (m a3mTryNotAtomic) TryUpdateString(k string, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdateString(k, d, l)
	}
	if m.s.QueryString(k)+d > l {
		return false
	}
	runtime.Gosched()
	m.s.UpdateString(k, d)
	return true
}

func a3mTryNotAtomicF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mTryNotAtomic{a3mFwd{a3mNew(t, cfg)}}
}

// Only the string twin of TryUpdate is Query-then-Update.
type a3mTryStringNotAtomic struct{ a3mFwd }

func (m a3mTryStringNotAtomic) TryUpdateString(k string, d, l float64) bool {
	return a3mTryNotAtomic(m).TryUpdateString(k, d, l)
}

func a3mTryStringNotAtomicF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mTryStringNotAtomic{a3mFwd{a3mNew(t, cfg)}}
}

// TryUpdate is atomic per key (a striped lock on the key's hash) but not
// with respect to other keys that share its cells.
type a3mTryPerKey struct {
	a3mFwd
	mu *[256]sync.Mutex
}

func a3mStripeB(b []byte) int {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return int(h % 256)
}

func a3mStripeS(s string) int {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return int(h % 256)
}

func (m a3mTryPerKey) TryUpdate(k []byte, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdate(k, d, l)
	}
	mu := &m.mu[a3mStripeB(k)]
	mu.Lock()
	defer mu.Unlock()
	if m.s.Query(k)+d > l {
		return false
	}
	runtime.Gosched()
	m.s.Update(k, d)
	return true
}

func (m a3mTryPerKey) TryUpdateString(k string, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdateString(k, d, l)
	}
	mu := &m.mu[a3mStripeS(k)]
	mu.Lock()
	defer mu.Unlock()
	if m.s.QueryString(k)+d > l {
		return false
	}
	runtime.Gosched()
	m.s.UpdateString(k, d)
	return true
}

func a3mTryPerKeyF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mTryPerKey{a3mFwd{a3mNew(t, cfg)}, new([256]sync.Mutex)}
}

// a3mTryLimit rewrites the (finite) limit, or decides on its own, before
// the wrapped sketch's exact TryUpdate.
type a3mTryLimit struct {
	a3mFwd
	f func(d, l float64) (decided, ok bool, l2 float64)
}

func (m a3mTryLimit) TryUpdate(k []byte, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdate(k, d, l)
	}
	decided, ok, l2 := m.f(d, l)
	if decided {
		return ok
	}
	return m.s.TryUpdate(k, d, l2)
}

func (m a3mTryLimit) TryUpdateString(k string, d, l float64) bool {
	if !a3mFinite(d, l) {
		return m.s.TryUpdateString(k, d, l)
	}
	decided, ok, l2 := m.f(d, l)
	if decided {
		return ok
	}
	return m.s.TryUpdateString(k, d, l2)
}

func a3mTryLimitF(f func(d, l float64) (bool, bool, float64)) sketchtest.Factory {
	return func(t testing.TB, cfg sketch.Config) sketch.Scorer { return a3mTryLimit{a3mFwd{a3mNew(t, cfg)}, f} }
}

// Decides with < instead of <=.
var a3mTryStrictLess = a3mTryLimitF(func(d, l float64) (bool, bool, float64) {
	return false, false, math.Nextafter(l, math.Inf(-1))
})

// Decides as if the comparison were made in float32: the limit widened by
// half a float32 ulp.
var a3mTryFloat32Decision = a3mTryLimitF(func(d, l float64) (bool, bool, float64) {
	f := float32(math.Abs(l))
	half := float64(math.Nextafter32(f, float32(math.Inf(1)))-f) / 2
	return false, false, l + half
})

// Negative deltas are admitted whatever the limit.
type a3mTryNegAdmitted struct{ a3mFwd }

func (m a3mTryNegAdmitted) TryUpdate(k []byte, d, l float64) bool {
	if a3mFinite(d, l) && d < 0 {
		m.s.Update(k, d)
		return true
	}
	return m.s.TryUpdate(k, d, l)
}

func (m a3mTryNegAdmitted) TryUpdateString(k string, d, l float64) bool {
	if a3mFinite(d, l) && d < 0 {
		m.s.UpdateString(k, d)
		return true
	}
	return m.s.TryUpdateString(k, d, l)
}

func a3mTryNegAdmittedF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mTryNegAdmitted{a3mFwd{a3mNew(t, cfg)}}
}

// A denied TryUpdate writes: it fills the key up to the limit.
type a3mTryDeniedFills struct{ a3mFwd }

func (m a3mTryDeniedFills) TryUpdate(k []byte, d, l float64) bool {
	if m.s.TryUpdate(k, d, l) {
		return true
	}
	if v := m.s.Query(k); v < l {
		m.s.Update(k, l-v)
	}
	return false
}

func (m a3mTryDeniedFills) TryUpdateString(k string, d, l float64) bool {
	if m.s.TryUpdateString(k, d, l) {
		return true
	}
	if v := m.s.QueryString(k); v < l {
		m.s.UpdateString(k, l-v)
	}
	return false
}

func a3mTryDeniedFillsF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mTryDeniedFills{a3mFwd{a3mNew(t, cfg)}}
}

// A limit above Hi is taken as Hi.
func a3mTryLimitCappedAtHi(t testing.TB, cfg sketch.Config) sketch.Scorer {
	hi := cfg.Hi
	return a3mTryLimitF(func(d, l float64) (bool, bool, float64) {
		return false, false, min(l, hi)
	})(t, cfg)
}

// A limit above Hi is not checked at all: the delta is admitted.
func a3mTryIgnoresLimitAboveHi(t testing.TB, cfg sketch.Config) sketch.Scorer {
	hi := cfg.Hi
	return a3mTryLimitF(func(d, l float64) (bool, bool, float64) {
		if l > hi {
			return false, false, math.MaxFloat64
		}
		return false, false, l
	})(t, cfg)
}

// ---- NaN / Inf mutants ----

// Update silently ignores a NaN delta.
type a3mNaNIgnored struct{ a3mFwd }

func (m a3mNaNIgnored) Update(k []byte, d float64) {
	if math.IsNaN(d) {
		return
	}
	m.s.Update(k, d)
}

// Update panics on a non-finite delta, without the "sketch:" prefix.
type a3mPanicNoPrefix struct{ a3mFwd }

func (m a3mPanicNoPrefix) Update(k []byte, d float64) {
	if !a3mFinite(d) {
		panic("grudge: non-finite delta")
	}
	m.s.Update(k, d)
}

// Update writes to the cells, then panics (with the right prefix).
type a3mWritesThenPanics struct{ a3mFwd }

func (m a3mWritesThenPanics) Update(k []byte, d float64) {
	if !a3mFinite(d) {
		m.s.Update(k, 1)
		panic("sketch: non-finite delta")
	}
	m.s.Update(k, d)
}

// TryUpdate takes a +Inf limit as "no limit" instead of panicking.
type a3mInfLimitOK struct{ a3mFwd }

func (m a3mInfLimitOK) TryUpdate(k []byte, d, l float64) bool {
	if math.IsInf(l, 1) && a3mFinite(d) {
		return m.s.TryUpdate(k, d, math.MaxFloat64)
	}
	return m.s.TryUpdate(k, d, l)
}

// ---- clock mutants (a mutated clock under a correct sketch) ----

// a3mMirrorClock turns a backwards step into a forward one: a step back
// counts as elapsed time.
type a3mMirrorClock struct {
	c  sketch.Clock
	mx atomic.Int64
}

func (c *a3mMirrorClock) NowMillis() int64 {
	now := c.c.NowMillis()
	for {
		m := c.mx.Load()
		if now >= m {
			if c.mx.CompareAndSwap(m, now) {
				return now
			}
			continue
		}
		return m + (m - now)
	}
}

// a3mWrapClock keeps 32 bits of milliseconds: ages wrap after 2^32 ms.
type a3mWrapClock struct{ c sketch.Clock }

func (c a3mWrapClock) NowMillis() int64 { return c.c.NowMillis() & (1<<32 - 1) }

// a3mCapClock caps every forward jump at 2^32-1 ms (an idle age that
// saturates at ~49.7 days).
type a3mCapClock struct {
	c            sketch.Clock
	mu           sync.Mutex
	offset, last int64
	init         bool
}

func (c *a3mCapClock) NowMillis() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	const limit = 1<<32 - 1
	r := c.c.NowMillis() - c.offset
	if c.init && r-c.last > limit {
		c.offset += r - c.last - limit
		r = c.last + limit
	}
	if !c.init || r > c.last {
		c.last, c.init = r, true
	}
	return r
}

func a3mWithClock(wrap func(sketch.Clock) sketch.Clock) sketchtest.Factory {
	return func(t testing.TB, cfg sketch.Config) sketch.Scorer {
		if cfg.Clock != nil {
			cfg.Clock = wrap(cfg.Clock)
		}
		return a3mFwd{a3mNew(t, cfg)}
	}
}

var (
	a3mBackStepAsElapsed = a3mWithClock(func(c sketch.Clock) sketch.Clock {
		m := &a3mMirrorClock{c: c}
		m.mx.Store(math.MinInt64)
		return m
	})
	a3mAgeWraps32 = a3mWithClock(func(c sketch.Clock) sketch.Clock { return a3mWrapClock{c} })
	a3mIdleCap49d = a3mWithClock(func(c sketch.Clock) sketch.Clock { return &a3mCapClock{c: c} })
)

// Reads grow by 0.1% while the clock is behind the latest reading seen: a
// backwards step counts as growth.
type a3mBackGrows struct {
	a3mFwd
	c  sketch.Clock
	mx *atomic.Int64
}

func (m a3mBackGrows) behind() bool {
	if m.c == nil {
		return false
	}
	now := m.c.NowMillis()
	for {
		x := m.mx.Load()
		if now <= x {
			return now < x
		}
		if m.mx.CompareAndSwap(x, now) {
			return false
		}
	}
}

func (m a3mBackGrows) grow(v float64) float64 {
	if m.behind() && v > 0 {
		return v * 1.001
	}
	return v
}

func (m a3mBackGrows) Update(k []byte, d float64)       { m.behind(); m.s.Update(k, d) }
func (m a3mBackGrows) UpdateString(k string, d float64) { m.behind(); m.s.UpdateString(k, d) }
func (m a3mBackGrows) Query(k []byte) float64           { return m.grow(m.s.Query(k)) }
func (m a3mBackGrows) QueryString(k string) float64     { return m.grow(m.s.QueryString(k)) }
func (m a3mBackGrows) UpdateAndQuery(k []byte, d float64) float64 {
	return m.grow(m.s.UpdateAndQuery(k, d))
}
func (m a3mBackGrows) UpdateAndQueryString(k string, d float64) float64 {
	return m.grow(m.s.UpdateAndQueryString(k, d))
}
func (m a3mBackGrows) TryUpdate(k []byte, d, l float64) bool {
	m.behind()
	return m.s.TryUpdate(k, d, l)
}
func (m a3mBackGrows) TryUpdateString(k string, d, l float64) bool {
	m.behind()
	return m.s.TryUpdateString(k, d, l)
}

func a3mBackGrowsF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	mx := new(atomic.Int64)
	mx.Store(math.MinInt64)
	return a3mBackGrows{a3mFwd{a3mNew(t, cfg)}, cfg.Clock, mx}
}

// ---- allocation and string-twin mutants ----

// Update copies the key to the heap.
type a3mUpdateAllocs struct{ a3mFwd }

func (m a3mUpdateAllocs) Update(k []byte, d float64) {
	b := make([]byte, len(k))
	copy(b, k)
	a3mSink.Store(&b)
	m.s.Update(k, d)
}

// The string twins convert keys longer than 32 bytes on the heap (as a
// 32-byte stack buffer would).
type a3mTwinLongAllocs struct{ a3mFwd }

func a3mLongKey(k string) {
	if len(k) > 32 {
		b := []byte(k)
		a3mSink.Store(&b)
	}
}

func (m a3mTwinLongAllocs) UpdateString(k string, d float64) { a3mLongKey(k); m.s.UpdateString(k, d) }
func (m a3mTwinLongAllocs) QueryString(k string) float64     { a3mLongKey(k); return m.s.QueryString(k) }
func (m a3mTwinLongAllocs) UpdateAndQueryString(k string, d float64) float64 {
	a3mLongKey(k)
	return m.s.UpdateAndQueryString(k, d)
}
func (m a3mTwinLongAllocs) TryUpdateString(k string, d, l float64) bool {
	a3mLongKey(k)
	return m.s.TryUpdateString(k, d, l)
}

// QueryString reads 1% below Query.
type a3mQueryStringLow struct{ a3mFwd }

func (m a3mQueryStringLow) QueryString(k string) float64 { return 0.99 * m.s.QueryString(k) }

// UpdateString does nothing for a finite delta.
type a3mUpdateStringNoop struct{ a3mFwd }

func (m a3mUpdateStringNoop) UpdateString(k string, d float64) {
	if !a3mFinite(d) {
		m.s.UpdateString(k, d)
	}
}

// UpdateAndQueryString returns the score from before its update.
type a3mUAQStringStale struct{ a3mFwd }

func (m a3mUAQStringStale) UpdateAndQueryString(k string, d float64) float64 {
	v := m.s.QueryString(k)
	m.s.UpdateString(k, d)
	return v
}

// ---- QueryDetailed mutants ----

type a3mDetailMap struct {
	a3mFwd
	f func(*sketch.Detail)
}

func (m a3mDetailMap) QueryDetailed(k []byte) sketch.Detail {
	d := m.s.QueryDetailed(k)
	m.f(&d)
	return d
}

func a3mDetailF(f func(*sketch.Detail)) sketchtest.Factory {
	return func(t testing.TB, cfg sketch.Config) sketch.Scorer { return a3mDetailMap{a3mFwd{a3mNew(t, cfg)}, f} }
}

var (
	// Every level reports its score + 1 (Score itself right).
	a3mDetailLevelsPlusOne = a3mDetailF(func(d *sketch.Detail) {
		for i := range d.Levels {
			d.Levels[i].Score++
		}
	})
	// Every level reports cell index 0.
	a3mDetailIndexZero = a3mDetailF(func(d *sketch.Detail) {
		for i := range d.Levels {
			d.Levels[i].Index = 0
		}
	})
)

// QueryDetailed's level scores are not decayed to the time of the call
// (the undecayed cell contents, kept by a no-decay shadow sketch with the
// same layout); its Score is right.
type a3mDetailUndecayed struct {
	a3mFwd
	shadow *sketch.Sketch
}

func (m a3mDetailUndecayed) Update(k []byte, d float64) { m.s.Update(k, d); m.shadow.Update(k, d) }
func (m a3mDetailUndecayed) UpdateString(k string, d float64) {
	m.s.UpdateString(k, d)
	m.shadow.UpdateString(k, d)
}
func (m a3mDetailUndecayed) UpdateAndQuery(k []byte, d float64) float64 {
	v := m.s.UpdateAndQuery(k, d)
	m.shadow.Update(k, d)
	return v
}
func (m a3mDetailUndecayed) UpdateAndQueryString(k string, d float64) float64 {
	v := m.s.UpdateAndQueryString(k, d)
	m.shadow.UpdateString(k, d)
	return v
}
func (m a3mDetailUndecayed) TryUpdate(k []byte, d, l float64) bool {
	ok := m.s.TryUpdate(k, d, l)
	if ok {
		m.shadow.Update(k, d)
	}
	return ok
}
func (m a3mDetailUndecayed) TryUpdateString(k string, d, l float64) bool {
	ok := m.s.TryUpdateString(k, d, l)
	if ok {
		m.shadow.UpdateString(k, d)
	}
	return ok
}
func (m a3mDetailUndecayed) QueryDetailed(k []byte) sketch.Detail {
	d := m.s.QueryDetailed(k)
	sh := m.shadow.QueryDetailed(k)
	for i := range d.Levels {
		d.Levels[i].Score = sh.Levels[i].Score
	}
	return d
}

func a3mDetailUndecayedF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	sc := cfg
	sc.Decay = nil
	if math.IsInf(sc.Hi, 1) {
		sc.Hi = math.MaxFloat32
	}
	if math.IsInf(sc.Lo, -1) {
		sc.Lo = -math.MaxFloat32
	}
	return a3mDetailUndecayed{a3mFwd{a3mNew(t, cfg)}, a3mNew(t, sc)}
}

// ---- At-form mutants ----

// a3mAtIgnoresTime has At forms that ignore t and use the clock.
type a3mAtIgnoresTime struct{ a3mFwd }

func (m a3mAtIgnoresTime) UpdateAt(_ time.Time, k string, d float64) { m.s.UpdateString(k, d) }
func (m a3mAtIgnoresTime) QueryAt(_ time.Time, k string) float64     { return m.s.QueryString(k) }
func (m a3mAtIgnoresTime) UpdateAndQueryAt(_ time.Time, k string, d float64) float64 {
	return m.s.UpdateAndQueryString(k, d)
}
func (m a3mAtIgnoresTime) TryUpdateAt(_ time.Time, k string, d, l float64) bool {
	return m.s.TryUpdateString(k, d, l)
}

func a3mAtIgnoresTimeF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mAtIgnoresTime{a3mFwd{a3mNew(t, cfg)}}
}

// a3mOverrideClock reads ov when set (a future At time honoured as the
// sketch's now for the duration of one call).
type a3mOverrideClock struct {
	c  sketch.Clock
	ov atomic.Int64
}

func (c *a3mOverrideClock) NowMillis() int64 {
	if v := c.ov.Load(); v != 0 {
		return v
	}
	return c.c.NowMillis()
}

// Now anchors the sketch's time scale as the fake clock's own Now does.
func (c *a3mOverrideClock) Now() time.Time { return time.UnixMilli(c.c.NowMillis()) }

// a3mAtFuture honours a future At time as given (the cells stamped in
// the future, their decay frozen until then).
type a3mAtFuture struct {
	a3mFwd
	c *a3mOverrideClock
}

func (m a3mAtFuture) enter(t time.Time) bool {
	if m.c == nil {
		return false
	}
	if ms := t.UnixMilli(); ms > m.c.c.NowMillis() {
		m.c.ov.Store(ms)
		return true
	}
	return false
}

func (m a3mAtFuture) leave(entered bool) {
	if entered {
		m.c.ov.Store(0)
	}
}

func (m a3mAtFuture) UpdateAt(t time.Time, k string, d float64) {
	e := m.enter(t)
	m.s.UpdateAt(t, k, d)
	m.leave(e)
}

func (m a3mAtFuture) QueryAt(t time.Time, k string) float64 {
	e := m.enter(t)
	v := m.s.QueryAt(t, k)
	m.leave(e)
	return v
}

func (m a3mAtFuture) UpdateAndQueryAt(t time.Time, k string, d float64) float64 {
	e := m.enter(t)
	v := m.s.UpdateAndQueryAt(t, k, d)
	m.leave(e)
	return v
}

func (m a3mAtFuture) TryUpdateAt(t time.Time, k string, d, l float64) bool {
	e := m.enter(t)
	v := m.s.TryUpdateAt(t, k, d, l)
	m.leave(e)
	return v
}

func a3mAtFutureF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	var oc *a3mOverrideClock
	if cfg.Clock != nil {
		oc = &a3mOverrideClock{c: cfg.Clock}
		cfg.Clock = oc
	}
	return a3mAtFuture{a3mFwd{a3mNew(t, cfg)}, oc}
}

// ---- background work ----

// Each scorer starts a background goroutine (a "sweeper" that idles
// until the test ends).
// It leaves the goroutine running for good: TestScorer allows a
// goroutine that the Scorer's t.Cleanup stops (the reference rotator's
// and the grudge face's tickers); package sketch's "no goroutine is ever
// started" is checked on the sketch itself by the witness.
func a3mStartsGoroutine(t testing.TB, cfg sketch.Config) sketch.Scorer {
	s := a3mNew(t, cfg)
	go func() { <-a3mNever }()
	return a3mFwd{s}
}

// a3mNever is never closed.
var a3mNever = make(chan struct{})

// ---- rotator ----

// a3mNoRotate is a "rotator" that ignores its Period: one sketch, never
// rotated, plus Close.
type a3mNoRotate struct{ a3mFwd }

func (a3mNoRotate) Close() {}

func a3mNoRotateF(t testing.TB, cfg sketch.Config) sketch.Scorer {
	return a3mNoRotate{a3mFwd{a3mNew(t, cfg)}}
}
