package core

import (
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/hw"
)

// Hashed is a key hashed by one sketch ([Sketch.Hash], [Sketch.HashString]):
// the first step of every keyed method, kept so that a caller touching the
// key more than once hashes it once, and can [Sketch.Prefetch] its cells
// before acting on them. The rotator uses it to start loading every
// generation's cells before the primary decides, so their cache misses
// overlap instead of queueing one generation behind the other; a batch
// over many keys can do the same.
//
// A Hashed belongs to the sketch that made it: the Hashed methods of
// another sketch (another seed, another size) panic on it, as they do on
// the zero Hashed. It holds no reference to the key, only its hash.
type Hashed struct {
	s *Sketch
	h uint64
}

// Hash hashes key for this sketch's Hashed methods. It does not allocate.
func (s *Sketch) Hash(key []byte) Hashed { return Hashed{s, s.sum64(key)} }

// HashString is Hash for a string key. It does not allocate.
func (s *Sketch) HashString(key string) Hashed { return Hashed{s, s.sum64String(key)} }

// mine returns k's hash, or panics if k was not made by s.
func (s *Sketch) mine(op string, k Hashed) uint64 {
	if k.s != s {
		panicForeign(op)
	}
	return k.h
}

//go:noinline
func panicForeign(op string) {
	panic("sketch: " + op + ": the Hashed key was not made by this sketch's Hash")
}

// Prefetch asks the CPU to start loading the key's L cells (hw.Prefetch)
// and returns without waiting. It changes nothing, and
// costs a few nanoseconds when the lines are already cached; a later
// method on k then finds its lines arriving or arrived. It panics if k
// was not made by s.
func (s *Sketch) Prefetch(k Hashed) {
	var ps [MaxLevels]unsafe.Pointer
	hw.Prefetch(ps[:s.lines(s.mine("Prefetch", k), &ps)])
}

// lines fills ps[:L] with the addresses of the cells of hash h and
// returns L. Index(h, l, m) < m <= stride, so every address is inside
// s.cells and needs no bounds check (this runs on every rotator write
// and TryUpdate).
func (s *Sketch) lines(h uint64, ps *[MaxLevels]unsafe.Pointer) int {
	base := unsafe.Pointer(unsafe.SliceData(s.cells))
	for l := range s.levels {
		ps[l] = unsafe.Add(base, uintptr(int(l)*s.stride+int(Index(h, l, s.m)))*unsafe.Sizeof(atom.Cell{}))
	}
	return int(s.levels)
}

// QueryHashedAt is QueryAt for a hashed key.
func (s *Sketch) QueryHashedAt(t time.Time, k Hashed) float64 {
	return s.query(s.mine("Query", k), s.tb.Millis(t))
}

// UpdateHashedAt is UpdateAt for a hashed key.
func (s *Sketch) UpdateHashedAt(t time.Time, k Hashed, delta float64) {
	CheckFinite("Update", "delta", delta)
	s.update(s.mine("Update", k), delta, s.tb.Millis(t))
}

// UpdateAndQueryHashedAt is UpdateAndQueryAt for a hashed key.
func (s *Sketch) UpdateAndQueryHashedAt(t time.Time, k Hashed, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.mine("UpdateAndQuery", k), delta, s.tb.Millis(t))
}

// TryReserveHashedAt is TryReserveAt for a hashed key.
func (s *Sketch) TryReserveHashedAt(t time.Time, k Hashed, delta, limit float64) (Receipt, bool) {
	CheckTry(delta, limit)
	h := s.mine("TryUpdate", k)
	var rc Receipt
	ok := s.tryUpdateReceipt(h, delta, limit, s.tb.Millis(t), &rc)
	return rc, ok
}

// AddHashedAt is AddAt for a hashed key.
func (s *Sketch) AddHashedAt(t time.Time, k Hashed, delta float64) Receipt {
	CheckFinite("Update", "delta", delta)
	return s.add(s.mine("Add", k), delta, s.tb.Millis(t))
}
