package sketch

// Clock supplies monotonic milliseconds. Sketches read it once per
// operation; a value lower than one seen before counts as zero elapsed
// time. Implementations must be safe for concurrent use.
type Clock interface{ NowMillis() int64 }

// Scorer is what *sketch.Sketch, *reference.Sketch and *rotator.Rotator
// share, so users and benchmarks swap implementations without other
// changes. All methods are safe for concurrent use.
type Scorer interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
	QueryDetailed(key []byte) Detail
	UpdateString(key string, delta float64)
	QueryString(key string) float64
	UpdateAndQueryString(key string, delta float64) float64
	TryUpdateString(key string, delta, limit float64) bool
}

// Detail is the per-level view of one key, as QueryDetailed returns it.
type Detail struct {
	// Score is the aggregate, what Query would have returned.
	Score float64
	// Levels holds one entry per level, in level order.
	Levels []LevelDetail
}

// LevelDetail is one level's cell for a key.
type LevelDetail struct {
	Level uint32  // 0..L-1
	Index uint32  // cell index in the level's row, 0..M-1
	Score float64 // the cell's score, decayed to the time of the call
}

// Sizes is a structure's footprint in bytes.
type Sizes struct {
	// Cells is the memory of the cell arrays as allocated (padding and
	// alignment slack included).
	Cells int
	// Total adds the fixed overhead: the owner struct, stripes, tables.
	Total int
}
