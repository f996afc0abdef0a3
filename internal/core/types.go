package core

// Clock supplies monotonic milliseconds. Sketches read it once per
// operation; a value lower than one seen before counts as zero elapsed
// time. Implementations must be safe for concurrent use.
type Clock interface{ NowMillis() int64 }

// Sizes is a structure's footprint in bytes.
type Sizes struct {
	// Cells is the memory of the cell arrays as allocated (padding and
	// alignment slack included).
	Cells int
	// Total adds the fixed overhead: the owner struct, stripes, tables.
	Total int
}
