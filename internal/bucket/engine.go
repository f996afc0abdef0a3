package bucket

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
)

// Config configures New.
type Config struct {
	// Lines is the number of 64-byte lines (buckets), at least 2. Memory
	// is Lines x 64 bytes (plus one line of alignment slack), whatever the
	// number of keys. [Suggest] picks it from a capacity target.
	Lines int
	// Law is the decay law and the clamp ([Linear] for a limiter's debt,
	// [Exponential] for a meter's rate, [None]).
	Law Law
	// Hasher hashes keys (nil means core.SipHash(), the keyed PRF: a
	// client that does not know the seed cannot aim at a line).
	Hasher core.HasherFactory
	// Seed is the hash seed, used when SeedSet; otherwise New draws one
	// from crypto/rand (sketch.RandomSeed).
	Seed    uint64
	SeedSet bool
	// Clock is the time source (nil means the monotonic system clock);
	// a *core.Timebase is shared as is.
	Clock core.Clock
	// SaturationSamples is the number of lines Saturation samples
	// (0 means 4096).
	SaturationSamples int
}

// Engine is a table of keyed loads in constant memory: Lines cache lines
// of SlotsPerLine entries, a key living in one of two lines chosen by a
// keyed hash, identified there by a 16-bit fingerprint. The package
// documentation has the model and the guarantees.
//
// Create one with New; the zero Engine is not usable. An Engine is safe
// for concurrent use by any number of goroutines; it takes no lock,
// starts no goroutine, and its operations do not allocate, with one
// exception: the first eviction whose floor lies 2^28 floor-histogram
// epochs past the histogram's last sweep (and the first eviction after a
// ReadFrom) publishes the sweep with one 16-byte allocation (floors.go,
// sweepPlan: its pointer's identity is what tells the sweep's helpers a
// later sweep began). An epoch is max(1, ceil(2(span+2)/256)) ticks:
// 2^28 of them are 97 days of engine time for limit.New(10, 20)'s law,
// and as little as 2^28 ticks (16 s at 16,384 ticks a ms) for a span
// under 127 ticks.
type Engine struct {
	lines  []line
	n      uint64 // len(lines)
	hasher core.Hasher
	hf     core.HasherFactory // hasher's factory: a restore that adopts a seed rebuilds it
	tb     *core.Timebase
	// The line headers' ms scale: the clock reading base is ms off of
	// it (base and off apart, not one epoch base - off: near MinInt64 ms
	// that difference wraps, audits 145 and 150). off is 0 from New, a
	// restored scale's reading after ReadFrom; below 2^47.
	base   int64
	off    uint64
	q      quant
	bytes  int
	sample int
	seed   uint64
	hooks  *testHooks // nil outside tests

	resets   atomic.Uint64 // snapshot loads so far: a Receipt from before one is void
	satCalls atomic.Uint64 // Saturation's sample streams
	floors   floorHist     // the lines' floors by stamp, for Saturation
}

// New returns an empty engine for cfg, or a *sketch.ConfigError (matched
// by errors.Is(err, sketch.ErrInvalidConfig)) naming the first invalid
// field.
func New(cfg Config) (*Engine, error) {
	if cfg.Lines < 2 || cfg.Lines > 1<<32-1 {
		return nil, newConfigError("Lines", cfg.Lines, "must be >= 2 and < 2^32; got %d", cfg.Lines)
	}
	if cfg.SaturationSamples < 0 {
		return nil, newConfigError("SaturationSamples", cfg.SaturationSamples, "must be >= 0; got %d", cfg.SaturationSamples)
	}
	q, err := newQuant(cfg.Law)
	if err != nil {
		return nil, err
	}
	hf := cfg.Hasher
	if hf == nil {
		hf = core.SipHash()
	}
	seed := cfg.Seed
	if !cfg.SeedSet {
		seed = core.RandomSeed()
	}
	h := hf(seed)
	if core.IsNil(h) {
		return nil, core.NilHasherErr("bucket", seed)
	}
	e := &Engine{q: q, hasher: h, hf: hf, tb: core.NewTimebase(cfg.Clock), sample: cfg.SaturationSamples, seed: seed}
	if e.sample == 0 {
		e.sample = 4096
	}
	e.lines, e.bytes = allocLines(cfg.Lines)
	e.floors.init(q.span)
	e.n = uint64(cfg.Lines)
	e.base, e.off = e.tb.NowMillis(), 0
	return e, nil
}

// MustNew is New that panics on an error.
func MustNew(cfg Config) *Engine {
	e, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return e
}

// Lines returns the number of lines.
func (e *Engine) Lines() int { return int(e.n) }

// Bytes returns the memory the engine holds: its lines (with the
// alignment slack) and its own struct.
func (e *Engine) Bytes() int { return e.bytes + int(unsafe.Sizeof(*e)) }

// Timebase returns the engine's time scale, for converting a time.Time
// to the milliseconds the At forms take (Timebase.Millis).
func (e *Engine) Timebase() *core.Timebase { return e.tb }

// Quantum describes how the engine represents its law: Unit is the load
// of one tick (linear and none: loads are whole multiples of it), Tick
// the time of one tick (0: time does not matter), Rate the linear drain
// per second actually applied (<= the law's Rate; equal to it for
// rates that divide evenly), Span the largest load in ticks.
//
// PerUnit is the number of ticks in one load unit (1/Unit, an integer;
// 0 for the exponential law) and PerMs the number of ticks in one
// millisecond when a tick is at most a millisecond (an integer; 0 when a
// tick is longer, or time does not matter): a linear engine with PerMs >
// 0 is an integer token bucket of PerUnit ticks per load unit draining
// PerMs ticks per ms, exact at whole milliseconds.
type Quantum struct {
	Unit    float64
	Tick    time.Duration
	Rate    float64
	Span    uint64
	PerUnit float64
	PerMs   uint64
}

// Quantum returns the engine's quantization of its law.
func (e *Engine) Quantum() Quantum { return e.q.quantum() }

// QuantumOf returns the quantization New would pick for law, or the
// *sketch.ConfigError New would return, without building an engine.
func QuantumOf(law Law) (Quantum, error) {
	q, err := pickQuant(law)
	if err != nil {
		return Quantum{}, err
	}
	return q.quantum(), nil
}

func (q *quant) quantum() Quantum {
	r := Quantum{Span: q.span, Rate: q.rate}
	if q.kind != KindExponential {
		r.Unit, r.PerUnit = 1/q.u, q.u
	}
	if q.gn != 0 {
		r.Tick = time.Duration(float64(time.Millisecond) * float64(q.gd) / float64(q.gn))
		if q.gd == 1 {
			r.PerMs = q.gn
		}
	}
	return r
}

// locate returns a key's two lines and its fingerprint. The lines are
// distinct; the fingerprint is never 0.
func (e *Engine) locate(h uint64) (i0, i1 uint64, fp uint16) {
	i0 = uint64(uint32(h)) * e.n >> 32
	i1 = (h >> 32) * e.n >> 32
	if i1 == i0 {
		i1++
		if i1 == e.n {
			i1 = 0
		}
	}
	// The fingerprint comes from a bijective mix of all 64 bits, so it is
	// independent of the two indexes for all practical purposes.
	m := h * 0x9E3779B97F4A7C15
	m ^= m >> 29
	m *= 0xBF58476D1CE4E5B9
	fp = uint16(m >> 48)
	if fp == 0 {
		fp = 1
	}
	return i0, i1, fp
}

// rel returns ms on the engine's scale: off plus the milliseconds after
// base (saturated: a clock that crossed most of the int64 range since base
// is far past the horizon), at least 0, at most 2^47-1.
func (e *Engine) rel(ms int64) uint64 {
	d := core.SubSat(ms, e.base)
	if d < 0 {
		back := uint64(-(d + 1)) + 1 // |d|, MinInt64 included
		if back >= e.off {
			return 0
		}
		return e.off - back
	}
	return min(e.off+uint64(d), lwMask) // off < 2^47: no overflow
}

// msOf returns the clock reading of r on the engine's scale (the inverse
// of rel below the horizon), saturated.
func (e *Engine) msOf(r uint64) int64 {
	return core.AddSat(e.base, int64(r)-int64(e.off))
}

func (e *Engine) now() uint64 { return e.rel(e.tb.NowMillis()) }

func (e *Engine) at(t time.Time) uint64 { return e.rel(e.tb.Millis(t)) }

func (e *Engine) hash(key string) uint64 { return e.hasher.Sum64String(key) }

// checkLoad panics on a NaN, infinite or negative load: a programmer
// error that would corrupt the estimate.
func checkLoad(op string, n float64) {
	if !(n >= 0) || math.IsInf(n, 1) {
		panic(fmt.Sprintf("bucket: %s: n must be finite and >= 0; got %v", op, n))
	}
}

// checkLimit panics on a NaN or infinite limit.
func checkLimit(op string, l float64) {
	if math.IsNaN(l) || math.IsInf(l, 0) {
		panic(fmt.Sprintf("bucket: %s: limit must be finite; got %v", op, l))
	}
}

// TryUpdate adds n to key's load now if the load plus n is at most limit,
// and reports whether it did. For one key it never admits past the limit
// under contention, and denies with room only in the rare races of
// docs/design.md, section 8, "Exact TryUpdate for one key".
func (e *Engine) TryUpdate(key string, n, limit float64) bool {
	checkLoad("TryUpdate", n)
	checkLimit("TryUpdate", limit)
	r := e.do(e.hash(key), time.Time{}, true, opTry, &Charge{n: n, limit: limit})
	return r.ok
}

// TryUpdateAt is TryUpdate at time t (see sketch.Timebase.Millis).
func (e *Engine) TryUpdateAt(t time.Time, key string, n, limit float64) bool {
	checkLoad("TryUpdate", n)
	checkLimit("TryUpdate", limit)
	return e.do(e.hash(key), t, false, opTry, &Charge{n: n, limit: limit}).ok
}

// TryUpdateAndQuery is TryUpdate that also returns the key's load after
// it: with n added if admitted, as it stands if denied (a limiter's
// Decision in one pass: Remaining and RetryAfter from the load).
func (e *Engine) TryUpdateAndQuery(key string, n, limit float64) (bool, float64) {
	checkLoad("TryUpdateAndQuery", n)
	checkLimit("TryUpdateAndQuery", limit)
	r := e.do(e.hash(key), time.Time{}, true, opTry, &Charge{n: n, limit: limit})
	return r.ok, e.q.value(r.stamp, r.t)
}

// TryUpdateAndQueryAt is TryUpdateAndQuery at time t.
func (e *Engine) TryUpdateAndQueryAt(t time.Time, key string, n, limit float64) (bool, float64) {
	checkLoad("TryUpdateAndQuery", n)
	checkLimit("TryUpdateAndQuery", limit)
	r := e.do(e.hash(key), t, false, opTry, &Charge{n: n, limit: limit})
	return r.ok, e.q.value(r.stamp, r.t)
}

// TryReserve is TryUpdate that also returns a Receipt, with which Refund
// can give the load back while nothing else has written the key's entry
// (see Refund). The Receipt of a write that filled the key to Max, or of
// the exponential law, refunds nothing.
func (e *Engine) TryReserve(key string, n, limit float64) (Receipt, bool) {
	checkLoad("TryReserve", n)
	checkLimit("TryReserve", limit)
	r := e.do(e.hash(key), time.Time{}, true, opTry, &Charge{n: n, limit: limit})
	return r.rc, r.ok
}

// TryReserveAt is TryReserve at time t.
func (e *Engine) TryReserveAt(t time.Time, key string, n, limit float64) (Receipt, bool) {
	checkLoad("TryReserve", n)
	checkLimit("TryReserve", limit)
	r := e.do(e.hash(key), t, false, opTry, &Charge{n: n, limit: limit})
	return r.rc, r.ok
}

// Update adds n to key's load now, unconditionally (clamped at Max).
func (e *Engine) Update(key string, n float64) {
	checkLoad("Update", n)
	e.do(e.hash(key), time.Time{}, true, opAdd, &Charge{n: n})
}

// UpdateAt is Update at time t.
func (e *Engine) UpdateAt(t time.Time, key string, n float64) {
	checkLoad("Update", n)
	e.do(e.hash(key), t, false, opAdd, &Charge{n: n})
}

// UpdateAndQuery is Update returning the key's load after it.
func (e *Engine) UpdateAndQuery(key string, n float64) float64 {
	checkLoad("UpdateAndQuery", n)
	r := e.do(e.hash(key), time.Time{}, true, opAdd, &Charge{n: n})
	return e.q.value(r.stamp, r.t)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (e *Engine) UpdateAndQueryAt(t time.Time, key string, n float64) float64 {
	checkLoad("UpdateAndQuery", n)
	r := e.do(e.hash(key), t, false, opAdd, &Charge{n: n})
	return e.q.value(r.stamp, r.t)
}

// Charge is a load and a limit with their ticks on one engine's law,
// converted once by Engine.Charge (which checks them as TryUpdate does)
// for a caller that passes the same pair on many calls (a limiter's cost
// and burst): TryCharge and AddCharge are TryUpdate and Update with
// them, without converting them again. A Charge is a value that only
// Engine.Charge makes; one made by an engine on another law is converted
// again on each call (it decides as the float methods do, only slower),
// and the zero Charge is a load of 0 against a limit of 0.
type Charge struct {
	n, limit float64
	c, lim   uint64  // units(n) and limitUnits(limit)
	u        float64 // the ticks per unit they were converted at; 0: not converted
}

// N returns the Charge's load.
func (ch Charge) N() float64 { return ch.n }

// Limit returns the Charge's limit.
func (ch Charge) Limit() float64 { return ch.limit }

// Charge converts n and limit to the engine's ticks once. It panics
// where TryUpdate would: n < 0, NaN or +Inf, or limit NaN or infinite.
func (e *Engine) Charge(n, limit float64) Charge {
	checkLoad("Charge", n)
	checkLimit("Charge", limit)
	ch := Charge{n: n, limit: limit}
	if q := &e.q; q.kind != KindExponential {
		ch.c, ch.lim, ch.u = q.units(n), q.limitUnits(limit), q.u
	}
	return ch
}

// TryCharge is TryUpdate(key, ch.N(), ch.Limit()).
func (e *Engine) TryCharge(key string, ch Charge) bool {
	return e.do(e.hash(key), time.Time{}, true, opTry, &ch).ok
}

// TryChargeAt is TryUpdateAt(t, key, ch.N(), ch.Limit()).
func (e *Engine) TryChargeAt(t time.Time, key string, ch Charge) bool {
	return e.do(e.hash(key), t, false, opTry, &ch).ok
}

// AddCharge is Update(key, ch.N()).
func (e *Engine) AddCharge(key string, ch Charge) {
	e.do(e.hash(key), time.Time{}, true, opAdd, &ch)
}

// AddChargeAt is UpdateAt(t, key, ch.N()).
func (e *Engine) AddChargeAt(t time.Time, key string, ch Charge) {
	e.do(e.hash(key), t, false, opAdd, &ch)
}

// Query returns key's load now: at least its true load. It never writes.
func (e *Engine) Query(key string) float64 {
	r := e.do(e.hash(key), time.Time{}, true, opQuery, &Charge{})
	return e.q.value(r.stamp, r.t)
}

// QueryAt is Query at time t.
func (e *Engine) QueryAt(t time.Time, key string) float64 {
	r := e.do(e.hash(key), t, false, opQuery, &Charge{})
	return e.q.value(r.stamp, r.t)
}
