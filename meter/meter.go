package meter

import (
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Option configures NewRate, NewInflight and NewNovelty.
type Option func(*options)

type options struct {
	clock      sketch.Clock
	seed       uint64
	seeded     bool
	levels     uint32
	cells      uint32
	maxBytes   int64
	hasher     sketch.HasherFactory
	periods    float64 // rotation Period in units of the window (Rate, Novelty)
	noPrefetch bool    // WithPrefetch(false)
}

// WithClock sets the clock (default: the sketch's monotonic clock); a
// sketchtest.FakeClock makes a meter deterministic.
func WithClock(c sketch.Clock) Option { return func(o *options) { o.clock = c } }

// WithSeed sets the hash seed (default: 8 bytes from crypto/rand).
func WithSeed(seed uint64) Option { return func(o *options) { o.seed, o.seeded = seed, true } }

// WithSize sets the sketch's levels L and cells per level M (0 keeps the
// sketch default, 4 x 100,000).
func WithSize(levels, cells uint32) Option {
	return func(o *options) { o.levels, o.cells = levels, cells }
}

// WithMaxBytes caps the memory of the cells of all the meter's sketches
// together (Rate and Novelty have two generations, Inflight one sketch;
// default sketch.DefaultMaxBytes, 4 GiB): a size above it is refused with
// a *sketch.ConfigError instead of allocated.
func WithMaxBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithPrefetch sets the rotator's Prefetch (default true) for Rate and
// Novelty: every write hashes the key for both generations and
// prefetches their cells first, which pays off for many distinct keys
// whose cells are not in cache and is extra work on a few hot keys
// (rotator.Config.Prefetch). Inflight has one sketch and ignores it.
func WithPrefetch(on bool) Option { return func(o *options) { o.noPrefetch = !on } }

// WithHasher sets the hash (default sketch.SipHash()).
func WithHasher(h sketch.HasherFactory) Option { return func(o *options) { o.hasher = h } }

// WithPeriodWindows sets the rotation Period of Rate and Novelty in units
// of their window (default 16; at least 1). See each type for what it
// bounds.
func WithPeriodWindows(k float64) Option { return func(o *options) { o.periods = k } }

// collect applies opts over the defaults. A nil Option, a negative
// MaxBytes or a size whose gens sketches need more than MaxBytes of cells
// is a *sketch.ConfigError prefixed "meter: ".
func collect(opts []Option, gens uint32) (options, error) {
	o := options{periods: 16}
	for i, f := range opts {
		if f == nil {
			return o, bad("Option", i, "option %d is nil", i)
		}
		f(&o)
	}
	if o.maxBytes < 0 {
		return o, bad("MaxBytes", o.maxBytes, "MaxBytes must be >= 0 (0 means %d); got %d", int64(sketch.DefaultMaxBytes), o.maxBytes)
	}
	if o.maxBytes == 0 {
		o.maxBytes = sketch.DefaultMaxBytes
	}
	levels, cells := o.levels, o.cells
	if levels == 0 {
		levels = sketch.DefaultLevels
	}
	if cells == 0 {
		cells = sketch.DefaultCellsPerLevel
	}
	if levels <= sketch.MaxLevels && cells <= sketch.MaxCellsPerLevel {
		if n := int64(gens) * core.CellBytes(levels, cells); n > o.maxBytes {
			return o, bad("Size", n, "%d x Levels x CellsPerLevel = %d x %d x %d needs %d bytes of cells, above MaxBytes %d; raise WithMaxBytes or shrink the size", gens, gens, levels, cells, n, o.maxBytes)
		}
	}
	if !o.seeded {
		o.seed = sketch.RandomSeed()
	}
	if o.hasher == nil {
		o.hasher = sketch.SipHash()
	}
	return o, nil
}

// bad returns the *sketch.ConfigError of an invalid argument or option.
func bad(field string, value any, format string, args ...any) error {
	return core.ConfigErr("meter", field, value, format, args...)
}

// periodOf returns k windows, rounded up to the ms, at least 1 ms.
func periodOf(window time.Duration, k float64) time.Duration {
	p := time.Duration(float64(window) * k)
	if p < 0 || float64(window)*k > float64(1<<62) {
		p = 1 << 62
	}
	p = (p + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	return max(p, time.Millisecond)
}

func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
