package meter

import (
	"math/big"
	"strconv"
	"time"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Option configures NewRate, NewInflight and NewNovelty.
type Option func(*options)

type options struct {
	common.Options
	periods float64 // rotation Period in units of the window (Rate, Novelty)
}

// WithClock sets the clock (default: the sketch's monotonic clock); a
// sketchtest.FakeClock makes a meter deterministic.
func WithClock(c sketch.Clock) Option { return func(o *options) { o.Clock = c } }

// WithSeed sets the hash seed (default: 8 bytes from crypto/rand).
func WithSeed(seed uint64) Option { return func(o *options) { o.Seed, o.Seeded = seed, true } }

// WithSize sets the sketch's levels L and cells per level M (0 keeps the
// sketch default, 4 x 100,000).
func WithSize(levels, cells uint32) Option {
	return func(o *options) { o.Levels, o.Cells = levels, cells }
}

// WithMaxBytes caps the memory of the cells of all the meter's sketches
// together (Rate and Novelty have two generations, Inflight one sketch;
// default, and 0, sketch.DefaultMaxBytes, 4 GiB): a size above it is refused with
// a *sketch.ConfigError instead of allocated. The cap counts the cell
// rows; each sketch also allocates three cache-line guard lines beside
// them (192 bytes on amd64, 384 on arm64), which the cap does not count.
func WithMaxBytes(n int64) Option { return func(o *options) { o.MaxBytes = n } }

// WithPrefetch sets the rotator's Prefetch (default true) for Rate and
// Novelty: every write hashes the key for both generations and
// prefetches their cells first, which pays off for many distinct keys
// whose cells are not in cache and is extra work on a few hot keys
// (rotator.Config.Prefetch). Inflight has one sketch and ignores it.
func WithPrefetch(on bool) Option { return func(o *options) { o.NoPrefetch = !on } }

// WithHasher sets the hash (default sketch.SipHash() under a secret
// random seed, since keys usually come from clients; sketch.XXH3() is
// faster where they do not).
func WithHasher(h sketch.HasherFactory) Option { return func(o *options) { o.Hasher = h } }

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
	return o, o.Finish("meter", strconv.Itoa(int(gens)), gens)
}

// bad returns the *sketch.ConfigError of an invalid argument or option.
func bad(field string, value any, format string, args ...any) error {
	return core.ConfigErr("meter", field, value, format, args...)
}

// maxPeriod is the longest rotation Period a Rate or Novelty takes:
// 2^62 ns, about 146 years. A longer window x PeriodWindows would have to
// be cut, and a Period shorter than the window breaks what each type
// promises ("Period ... at least the window"), so it is refused.
const maxPeriod = 1 << 62

// checkPeriod reports a window x PeriodWindows above maxPeriod, naming
// Window when the window alone is too long and PeriodWindows otherwise.
// Both compare exactly (a float64 window rounded 2^62 + 512 ns down to
// 2^62: audit 40).
func checkPeriod(window time.Duration, k float64) error {
	if window > maxPeriod {
		return bad("Window", window, "window must be at most 2^62 ns (about 146 years); got %v", window)
	}
	if periodProduct(window, k).Cmp(new(big.Float).SetInt64(maxPeriod)) > 0 {
		return bad("PeriodWindows", k, "window x PeriodWindows must be at most 2^62 ns (about 146 years); got %v x %v", window, k)
	}
	return nil
}

// periodProduct is window x k, exactly (63 bits by 53 fit 128).
func periodProduct(window time.Duration, k float64) *big.Float {
	w := new(big.Float).SetPrec(128).SetInt64(int64(window))
	return w.Mul(w, new(big.Float).SetPrec(128).SetFloat64(k))
}

// periodOf returns k windows, rounded up to the ms, at least 1 ms: never
// below the exact product (a float64 product came out 1 ns below the
// window of 73 years and more: audit 40). The caller has checked the
// product with checkPeriod: at most maxPeriod, so neither the conversion
// nor the rounding overflows.
func periodOf(window time.Duration, k float64) time.Duration {
	x := periodProduct(window, k)
	n, acc := x.Int64()
	if acc == big.Below { // x.Int64 truncates toward 0: round up
		n++
	}
	return max(wholeMs(time.Duration(n)), time.Millisecond)
}

// wholeMs returns d rounded up to a whole millisecond.
func wholeMs(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
