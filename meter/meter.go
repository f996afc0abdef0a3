package meter

import (
	"time"
	"unsafe"

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

func collect(opts []Option) options {
	o := options{periods: 16}
	for _, f := range opts {
		f(&o)
	}
	if !o.seeded {
		o.seed = sketch.RandomSeed()
	}
	if o.hasher == nil {
		o.hasher = sketch.SipHash()
	}
	return o
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
