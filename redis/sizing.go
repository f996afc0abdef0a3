package redis

import (
	"fmt"

	"github.com/lfgrudge/grudge/internal/bucket"
)

// Size is a server sketch size for a capacity target: what Suggest
// returns, to put in LimiterConfig (or Config).
type Size struct {
	Levels        uint32 // LimiterConfig.Levels
	CellsPerLevel uint32 // LimiterConfig.CellsPerLevel: M per shard
	Shards        uint32 // LimiterConfig.Shards (at least 1)
	// MemoryBytes is the payload of the sketch's server strings
	// (Sketch.MemoryBytes, one generation as a Limiter's): Shards x (40 +
	// L x M x 8) bytes. The server allocates each string in an allocator
	// size class, so its MEMORY USAGE is higher, by up to a quarter
	// (jemalloc: 3,670,072 bytes for the default's 3,200,040).
	MemoryBytes int64
	// Deny is the predicted share of fresh keys (keys never seen) denied
	// with the keys at their limit: for the k keys of a shard, the Bloom
	// formula (1 - e^(-k/M))^L plus what double hashing adds, k / (M^2
	// (L-1)), which only a small sketch notices (Suggest(3, 0.001, 1):
	// L 4 x M 33, Deny 0.000975 where the Bloom formula alone gives
	// 0.000057); Got the predicted share of those keys that got their
	// whole burst when they arrived.
	Deny, Got float64
}

// Suggest returns the smallest server sketch for a Limiter that holds
// keys keys at their limit at once (each at a debt that would deny a
// request) with a share deny of fresh keys denied because of them (the
// formula's expected share: a given seed misses it by a few percent of
// it either way), spread over at least shards shards (0 means 1; each holds about
// keys/shards). It is the count-min's Bloom-filter formula: a fresh key
// is denied when each of its L cells holds a key at its limit, so about
// log2(1/deny) levels of keys/ln 2 cells, 1.44 log2(1/deny) cells (11.5
// log2(1/deny) bytes) per key: 1M keys at 1% take 7 x 1,370,425 cells,
// 73 MiB. Keys below their limit cost less: a cell denies once the debts
// in it add up to the burst. docs/capacity.md compares the measured
// rates.
//
// Each shard is one server string, which must fit in Redis's default
// proto-max-bulk-len (512 MiB: Sketch.Check refuses a larger one), so
// Suggest raises Shards until a shard's string fits: 10M keys at 1% take
// 2 shards of about 366 MiB. keys must be >= 1, deny in (0, 1) and shards
// at most 16384, and the size must fit in 16384 shards, or the error
// matches ErrInvalidConfig.
func Suggest(keys int, deny float64, shards uint32) (Size, error) {
	if shards == 0 {
		shards = 1
	}
	if keys < 1 || !(deny > 0 && deny < 1) || shards > maxShards {
		return Size{}, fmt.Errorf("%w: Suggest needs keys >= 1, deny in (0, 1) and shards <= %d; got %d, %v, %d",
			ErrInvalidConfig, maxShards, keys, deny, shards)
	}
	for {
		per := keys / int(shards) // ceil, without overflowing at MaxInt
		if keys%int(shards) != 0 {
			per++
		}
		g, err := bucket.SuggestCountMin(per, deny, 1)
		size := stringSize(g.Levels, g.Cells)
		if err == nil && size <= defaultMaxBulk {
			return Size{
				Levels: g.Levels, CellsPerLevel: g.Cells, Shards: shards,
				MemoryBytes: int64(shards) * size,
				Deny:        g.Deny, Got: g.Got,
			}, nil
		}
		if shards == maxShards {
			if err == nil {
				err = fmt.Errorf("a shard's string is %d bytes, above 512 MiB", size)
			}
			return Size{}, fmt.Errorf("%w: Suggest: %d keys at a denial rate of %v do not fit in %d shards: %v",
				ErrInvalidConfig, keys, deny, maxShards, err)
		}
		// More shards: as many as the excess asks for (a shard's cells
		// scale with its keys), at least one more; doubled where the
		// count-min could not be sized at all.
		next := uint64(shards) * 2
		if err == nil {
			next = max(uint64(shards)+1, (uint64(shards)*uint64(size)+defaultMaxBulk-1)/defaultMaxBulk)
		}
		shards = uint32(min(next, maxShards))
	}
}
