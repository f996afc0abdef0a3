package limit

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/core"
)

// Sizing is Suggest's answer: the memory each engine needs to hold Keys
// keys at their limit at once with at most a share Deny of fresh keys
// (keys never seen) denied because of them. docs/capacity.md has the
// models and the measurements behind both.
type Sizing struct {
	Keys int
	Deny float64
	// Buckets is the Buckets engine's size (WithCapacity gives it Lines
	// lines): about 5 bytes per key for a Deny of 1% to 0.1%; below about
	// 7e-4 its 16-bit fingerprints set the size (39 bytes per key at
	// 1e-4, 391 at 1e-5, 3906 at 1e-6), and for 1,000 keys or more the
	// count-min is the smaller below about 7e-6 (for fewer keys, lower:
	// 1.1e-6 at 100; docs/capacity.md, "Sizing").
	Buckets BucketsSize
	// CountMin is the count-min's, for the default two generations
	// (WithCapacity recomputes it for WithGenerations): about 1.44 x
	// log2(1/Deny) cells of 8 bytes per key and generation.
	CountMin CountMinSize
}

// BucketsSize is a size of the Buckets engine.
type BucketsSize struct {
	Lines int // 64-byte lines
	Bytes int // the memory the engine holds (Limiter.Sizes().Total)
	// Deny and Got are the model's fresh-key denial rate and share of
	// the Keys that got their burst, at this size. Suggest picks the
	// size at which the model predicts Deny/2, a margin the measurements
	// need (docs/capacity.md, "Sizing").
	Deny, Got float64
}

// CountMinSize is a size of the count-min engine.
type CountMinSize struct {
	Levels, Cells uint32 // WithSize(Levels, Cells)
	Generations   int
	// Bytes is its cells: Generations x Levels x Cells x 8, each row
	// rounded up to whole cache lines (8 cells on amd64, 16 on arm64),
	// what WithMaxBytes compares (each generation's three guard lines,
	// 192 bytes on amd64, come on top: see WithMaxBytes).
	Bytes int
	// Deny and Got are the Bloom filter formula's fresh-key denial rate,
	// (1 - e^(-Keys/Cells))^Levels, and share of the Keys that got their
	// burst, at this size.
	Deny, Got float64
}

// Suggest returns the smallest size of each engine that holds keys keys
// at their limit with a fresh-key denial rate of at most deny (in (0,
// 1)): for Buckets, whose model is asked for half of deny; for CountMin,
// the Bloom filter formula's expected rate, which a given hash seed
// misses by a few percent of it either way (0.96% to 1.06% measured over
// six seeds at 1%). A key at its limit is one whose debt would deny a request: keys
// well within their limit cost the count-min nothing and the Buckets
// engine an entry only while their debt lasts. WithCapacity(keys, deny)
// builds the limiter at that size. Buckets is the zero
// BucketsSize when no Buckets engine of at most 2^32 lines holds them,
// and CountMin the zero CountMinSize when no count-min of at most 2^30
// cells per level does; the other still answers. An invalid argument,
// or a size no engine reaches, is a *sketch.ConfigError (field
// Capacity).
func Suggest(keys int, deny float64) (Sizing, error) {
	if keys < 1 || !(deny > 0 && deny < 1) {
		return Sizing{}, bad("Capacity", keys, "Suggest needs keys >= 1 and deny in (0, 1); got %d, %v", keys, deny)
	}
	// An engine too large to build (more than 2^32 lines, more than 2^30
	// cells per level) leaves its size zero: the other still answers.
	sz := Sizing{Keys: keys, Deny: deny}
	g, gErr := bucket.Suggest(keys, deny)
	if gErr == nil {
		sz.Buckets = BucketsSize{Lines: g.Lines, Bytes: g.Bytes, Deny: g.Deny, Got: g.Got}
	}
	c, cErr := bucket.SuggestCountMin(keys, deny, core.DefaultGenerations)
	if cErr == nil {
		sz.CountMin = CountMinSize{Levels: c.Levels, Cells: c.Cells, Generations: c.Generations, Bytes: c.Generations * int(core.CellBytes(c.Levels, c.Cells)), Deny: c.Deny, Got: c.Got}
	}
	if gErr != nil && cErr != nil {
		return Sizing{}, bad("Capacity", keys, "%v", gErr)
	}
	return sz, nil
}

// capacityErr checks WithCapacity's arguments.
func capacityErr(keys int, deny float64) error {
	if keys < 1 || !(deny > 0 && deny < 1) || math.IsNaN(deny) {
		return bad("Capacity", keys, "WithCapacity needs keys >= 1 and deny in (0, 1); got %d, %v", keys, deny)
	}
	return nil
}

// Capacity returns how many keys at their limit at once the limiter's
// memory holds with at most a share deny (in (0, 1)) of fresh keys
// denied because of them: Suggest's models read the other way. For the
// Buckets engine, the most keys for which its capacity model predicts at
// most deny/2 (Suggest's margin: docs/capacity.md, "Sizing") and, in a
// small engine, where one line's eviction floor alone denies about
// 2/lines of fresh keys, few enough floors in all but one engine in a
// thousand, so that Suggest(Capacity(deny), deny) fits in this limiter;
// for the count-min,
// the most keys for which the Bloom formula (1 - e^(-keys/M))^L, plus
// what double hashing adds in a small sketch (about keys/(M^2 (L-1))),
// is at most deny (every generation holds them all). It is math.MaxInt for
// Inf. It panics on a deny outside (0, 1), and on the zero Limiter.
func (l *Limiter) Capacity(deny float64) int {
	if !(deny > 0 && deny < 1) {
		panic(fmt.Sprintf("limit: Capacity: deny must be in (0, 1); got %v", deny))
	}
	switch {
	case l.b != nil:
		lines := l.b.Lines()
		ok := func(keys int) bool { return bucket.Fits(keys, lines, deny) }
		lo, hi := 0, lines*bucket.SlotsPerLine
		for ok(hi) {
			lo, hi = hi, 2*hi
		}
		for hi-lo > 1 { // ok(lo), !ok(hi)
			if mid := lo + (hi-lo)/2; ok(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo
	case l.r != nil:
		c := l.r.Config().Sketch
		return bucket.CountMinCapacity(deny, c.Levels, c.CellsPerLevel)
	}
	l.unset()
	return math.MaxInt
}
