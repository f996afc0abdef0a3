package core

import (
	"sync/atomic"
	"unsafe"
)

// numStripes is the number of TryUpdate sequence stripes (a power of
// two). Admitted TryUpdates on keys that hash to the same stripe commit
// one at a time; 256 stripes keep unrelated hot keys apart (8 hot keys
// share a stripe with probability ~10%) for 16 KiB.
const numStripes = 256

// stripe is one sequence counter on its own cache line. seq is even when
// no TryUpdate of the stripe is committing and odd while one is; it only
// grows, by 1 on acquire and 1 on release.
type stripe struct {
	seq atomic.Uint64
	_   [cacheLine - 8]byte
}

// allocStripes returns numStripes stripes whose first one starts on a
// cache-line boundary, so each stripe owns exactly one line, with at least
// one guard line before and after so no other heap object shares the first
// or last stripe's line.
func allocStripes() []stripe {
	raw := make([]stripe, numStripes+3)
	p := unsafe.Pointer(&raw[0])
	// One guard line, then up to a line of slack to reach a boundary;
	// that leaves at least one whole line after the last stripe.
	shift := uintptr(cacheLine) + (uintptr(cacheLine)-uintptr(p)%uintptr(cacheLine))%uintptr(cacheLine)
	return unsafe.Slice((*stripe)(unsafe.Add(p, shift)), numStripes)
}

// stripeOf picks the stripe of a key from its hash. It folds the high
// bits into the low ones so it does not track the low 32 bits alone,
// which pick level indexes.
func stripeOf(h uint64) uint64 {
	return ((h >> 40) ^ (h >> 20) ^ h) & (numStripes - 1)
}
