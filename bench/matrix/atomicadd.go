package matrix

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// AtomicAdd is the lock-free lower bound, built as pingora-limits builds
// its estimator: L rows of M atomic.Int64 counters, an Update is one
// fetch-add per row, a Query the minimum of the L loads. It uses the same
// hasher (sketch.XXH3, seed 0) and the same sketch.Index layout as the
// sketches, so it touches the same cells. It has no decay, no clamp, no
// clock and no padding, and counts whole units: deltas are truncated to
// int64.
//
// Its TryUpdate is a Query followed by an Update: not atomic (racing
// callers can all pass the check), only a cost floor. Safe for
// concurrent use; build it with NewAtomicAdd.
type AtomicAdd struct {
	hasher sketch.Hasher
	cells  []atomic.Int64 // L*M counters; row l is cells[l*M:(l+1)*M]
	levels uint32
	m      uint32
}

// NewAtomicAdd returns an empty AtomicAdd of levels rows of m counters.
func NewAtomicAdd(levels, m uint32) *AtomicAdd {
	return &AtomicAdd{
		hasher: sketch.XXH3()(0),
		cells:  make([]atomic.Int64, int(levels)*int(m)),
		levels: levels,
		m:      m,
	}
}

func (a *AtomicAdd) cell(h uint64, l uint32) *atomic.Int64 {
	return &a.cells[int(l)*int(a.m)+int(core.Index(h, l, a.m))]
}

// Update adds int64(delta) to the key's counter in every row.
func (a *AtomicAdd) Update(key []byte, delta float64) {
	h, d := a.hasher.Sum64(key), int64(delta)
	for l := range a.levels {
		a.cell(h, l).Add(d)
	}
}

// UpdateAndQuery adds as Update does and returns the minimum of the
// fetch-add results.
func (a *AtomicAdd) UpdateAndQuery(key []byte, delta float64) float64 {
	h, d := a.hasher.Sum64(key), int64(delta)
	r := int64(math.MaxInt64)
	for l := range a.levels {
		r = min(r, a.cell(h, l).Add(d))
	}
	return float64(r)
}

func (a *AtomicAdd) query(h uint64) int64 {
	r := int64(math.MaxInt64)
	for l := range a.levels {
		r = min(r, a.cell(h, l).Load())
	}
	return r
}

// Query returns the minimum of the key's L counters.
func (a *AtomicAdd) Query(key []byte) float64 { return float64(a.query(a.hasher.Sum64(key))) }

// TryUpdate adds delta if Query+delta <= limit; check and add are not one
// atomic step.
func (a *AtomicAdd) TryUpdate(key []byte, delta, limit float64) bool {
	h := a.hasher.Sum64(key)
	if !(float64(a.query(h))+delta <= limit) {
		return false
	}
	d := int64(delta)
	for l := range a.levels {
		a.cell(h, l).Add(d)
	}
	return true
}

// Sizes reports the counters (Cells) and the counters plus the struct
// (Total).
func (a *AtomicAdd) Sizes() sketch.Sizes {
	c := len(a.cells) * 8
	return sketch.Sizes{Cells: c, Total: c + int(unsafe.Sizeof(*a))}
}
