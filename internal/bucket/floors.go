package bucket

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// floorBuckets is the number of buckets of the floor histogram.
const floorBuckets = 256

// floorHist counts the lines by the stamp of their eviction floor, so
// that Saturation can tell, without reading the lines, how many of them
// deny a fresh key: the floors are the rare events of the table (one per
// line at most, set only by evictions), too rare for a sample to count
// well near the onset of saturation, where the number matters.
//
// Bucket i holds the lines whose floor stamp s has s/width = e with
// e mod floorBuckets = i, as one word: e's low 32 bits (high half) and
// the count (low half). The ring spans at least twice the largest load
// (span ticks), so a live floor (s > now) is never in a bucket that a
// later floor reuses; a bucket whose epoch is in the past is ignored by
// readers and reset by the next floor that maps to it. Only evictions
// write it (an atomic add, or a CAS when the bucket turns over), never
// the hot path.
type floorHist struct {
	_     cpu.CacheLinePad
	width uint64 // ticks per bucket, >= 1
	b     [floorBuckets]atomic.Uint64
	// top[i] is at least the largest floor stamp counted in b[i] in its
	// current epoch (raised, never lowered, within an epoch): the bucket
	// at a reader's threshold counts nothing when its top is below it.
	top [floorBuckets]atomic.Uint64
	_   cpu.CacheLinePad
}

func (h *floorHist) init(span uint64) {
	h.width = max(1, (2*(span+2)+floorBuckets-1)/floorBuckets)
}

// move records that a line's floor went from old to new (0: none).
func (h *floorHist) move(old, new uint64) {
	if old != 0 {
		h.add(old, false)
	}
	if new != 0 {
		h.add(new, true)
	}
}

// add counts (inc) or uncounts a floor at stamp s.
func (h *floorHist) add(s uint64, inc bool) {
	ep := uint32(s / h.width)
	w := &h.b[ep%floorBuckets]
	if inc {
		// Raise the bucket's top first, so that a reader that sees the
		// count sees a top at least as high (or a stale one from an older
		// epoch, which it ignores).
		tp := &h.top[ep%floorBuckets]
		for {
			x := tp.Load()
			if xe := x / h.width; xe > s/h.width || xe == s/h.width && x >= s {
				break // a newer epoch's top, or already high enough
			}
			if tp.CompareAndSwap(x, s) {
				break
			}
		}
	}
	for {
		x := w.Load()
		xe, c := uint32(x>>32), uint32(x)
		var n uint64
		switch {
		case xe == ep && inc:
			n = x + 1
		case xe == ep:
			if c == 0 {
				return
			}
			n = x - 1
		case !inc || int32(ep-xe) < 0:
			return // the bucket moved on: that floor has expired
		default:
			n = uint64(ep)<<32 | 1 // a new epoch: the old counts expired
		}
		if w.CompareAndSwap(x, n) {
			return
		}
	}
}

// above returns the number of lines whose floor stamp is above theta.
// The bucket that holds theta counts in full when its top is above
// theta (and not at all otherwise): the count is exact but for floors
// within one bucket (width ticks, about span/128) above theta, which it
// may count too: the reading errs high, as an alert should.
func (h *floorHist) above(theta uint64) float64 {
	e0 := theta / h.width
	edge := 1.0
	if tp := h.top[e0%floorBuckets].Load(); tp/h.width == e0 && tp <= theta {
		edge = 0
	}
	sum := 0.0
	for i := range h.b {
		x := h.b[i].Load()
		xe, c := uint32(x>>32), float64(uint32(x))
		switch d := xe - uint32(e0); {
		case d == 0:
			sum += edge * c
		case d < floorBuckets:
			sum += c
		}
	}
	return sum
}
