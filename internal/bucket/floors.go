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
//
// The words keep 32 bits of an epoch, which wraps (after 9.4 hours of
// 16,000 ticks per ms at width 251, 2.1 years of limit.New(10, 20)'s 15
// at width 469), and the comparisons must not: audit 89 found an engine
// whose time had passed 2^31 epochs dropping every new floor (a bucket
// never written read as newer: Saturation blind to a flood) and a
// reader 2^32 epochs after a flood counting its floors again. So:
//
//   - Writers compare 32-bit epochs as int32 differences, exact while
//     every word is within 2^31 epochs of the floor written. last is the
//     epoch of the latest sweep: a floor at least 2^28 epochs past it
//     first sweeps the ring (every word older than the floor's window is
//     re-stamped with a recent expired epoch of its bucket and a count of
//     0), and a floor more than 2^29 epochs before it has expired (last
//     is at most a ring past the clock) and is ignored. So every word
//     stays within 2^29 + 2 rings of last, and a floor written is within
//     2^29 of it.
//   - A sweep is published before it runs (sw: its base, the last it
//     reads the words against, and its target), and every writer that
//     finds one unfinished helps it finish (the re-stamps are the same
//     whoever makes them) before it reads a word; a writer re-reads sw
//     before its CAS and starts over if a sweep began since (audit 90:
//     two evictions that each swept, or one that read a word before a
//     sweep and wrote it after, misread a word 2^31 epochs away: a live
//     count erased, or a bucket holding an old epoch that dropped new
//     floors). A sweep that begins between that re-read and the CAS
//     has not re-stamped the word yet (or the CAS fails), and reads it
//     against the same base. No lock: a sweep is 256 CASes that any
//     writer can complete.
//   - Readers compare full epochs: top[i] is 64 bits, raised before its
//     word takes a newer epoch, so a word counts only when top[i]'s epoch
//     is in the reader's window and the word holds that epoch's low 32
//     bits (the word then holds that epoch: a writer that raised top[i]
//     there had every word within 2^30 of it). Reading never writes.
type floorHist struct {
	_     cpu.CacheLinePad
	width uint64 // ticks per bucket, >= 1
	b     [floorBuckets]atomic.Uint64
	// top[i] is at least the largest floor stamp counted in b[i] in its
	// current epoch (raised, never lowered): the bucket at a reader's
	// threshold counts nothing when its top is below it, and top[i]'s
	// epoch is the full epoch of b[i]'s count for a reader.
	top  [floorBuckets]atomic.Uint64
	last atomic.Uint64             // the target of the latest finished sweep (0: none yet)
	sw   atomic.Pointer[sweepPlan] // the latest sweep begun (nil: none); finished when last is its target
	_    cpu.CacheLinePad
}

// histHook, nil but in tests, holds every floorHist.add at a point
// (histSettled: last and the sweep read; histDecided: the word read and
// its new value chosen) so that a test can replay an interleaving. A
// package variable, not a field: the engine's struct is part of its
// memory budget (LinesFor), and a field cost the default a line.
var histHook func(point int)

// The points of histHook.
const (
	histSettled = iota + 1
	histDecided
)

// sweepPlan is one sweep: the words are read against base (last when it
// began) and re-stamped when older than target's window.
type sweepPlan struct{ base, target uint64 }

// The writers' horizons, in epochs: a floor sweepAfter past last sweeps
// first; one staleAfter before it has expired.
const (
	sweepAfter = 1 << 28
	staleAfter = 1 << 29
)

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

// settled returns last and the latest sweep, once no sweep is unfinished
// (helping one finish if it is).
func (h *floorHist) settled() (uint64, *sweepPlan) {
	for {
		p := h.sw.Load()
		last := h.last.Load()
		if p == nil || last == p.target {
			return last, p
		}
		h.sweep(p)
	}
}

// add counts (inc) or uncounts a floor at stamp s.
func (h *floorHist) add(s uint64, inc bool) {
	full := s / h.width
	ep := uint32(full)
	w := &h.b[ep%floorBuckets]
	for {
		last, p := h.settled()
		if histHook != nil {
			histHook(histSettled)
		}
		if int64(full-last) >= sweepAfter {
			np := &sweepPlan{base: last, target: full}
			if h.sw.CompareAndSwap(p, np) {
				h.sweep(np)
			}
			continue
		}
		if int64(last-full) > staleAfter {
			return // expired long ago, and swept: no word holds it
		}
		if inc {
			// Raise the bucket's top first, so that a reader that sees the
			// count sees a top at least as high (or a stale one from an
			// older epoch, which it ignores). Raising it again on a retry
			// changes nothing.
			tp := &h.top[ep%floorBuckets]
			for {
				x := tp.Load()
				if xe := x / h.width; xe > full || xe == full && x >= s {
					break // a newer epoch's top, or already high enough
				}
				if tp.CompareAndSwap(x, s) {
					break
				}
			}
		}
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
		if histHook != nil {
			histHook(histDecided)
		}
		if h.sw.Load() != p {
			continue // a sweep began since: read the word again after it
		}
		if w.CompareAndSwap(x, n) {
			return
		}
	}
}

// sweep runs (or helps finish) p: every word older than the window of
// p.target (more than a ring before it), read against p.base, gets the
// latest epoch of its bucket a ring before p.target and a count of 0;
// then last becomes p.target. Every re-stamp is the same whoever makes
// it, so helpers racing each other agree; a helper that finds the sweep
// finished, or a later one begun, stops (writers write only once it is
// finished, and a word loaded before a writer's CAS fails its CAS).
// p.target is at least 2^28.
func (h *floorHist) sweep(p *sweepPlan) {
	old := p.target - floorBuckets // words below this epoch are expired
	for i := range h.b {
		// The latest epoch of bucket i at or below old.
		re := old - (old-uint64(i))%floorBuckets
		for {
			x := h.b[i].Load()
			if h.sw.Load() != p || h.last.Load() == p.target {
				// Finished (by another helper), or a later sweep begun: a
				// word loaded now may be a writer's since, which base no
				// longer reads.
				return
			}
			xe := p.base + uint64(int64(int32(uint32(x>>32)-uint32(p.base))))
			if xe+floorBuckets > p.target || uint32(x>>32) == uint32(re) {
				break // within the window (or newer), or re-stamped already
			}
			if h.b[i].CompareAndSwap(x, uint64(uint32(re))<<32) {
				break
			}
		}
	}
	h.last.CompareAndSwap(p.base, p.target)
}

// above returns the number of lines whose floor stamp is above theta.
// The bucket that holds theta counts in full when its top is above
// theta (and not at all otherwise): the count is exact but for floors
// within one bucket (width ticks, about span/128) above theta, which it
// may count too: the reading errs high, as an alert should.
func (h *floorHist) above(theta uint64) float64 {
	e0 := theta / h.width
	sum := 0.0
	for i := range h.b {
		tp := h.top[i].Load()
		te := tp / h.width
		if te < e0 || te-e0 >= floorBuckets || te == e0 && tp <= theta {
			continue // the bucket's epoch is outside the window, or the edge's top is not above theta
		}
		if x := h.b[i].Load(); uint32(x>>32) == uint32(te) {
			sum += float64(uint32(x))
		}
	}
	return sum
}
