package core

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/lfgrudge/grudge/internal/atom"
)

// The stamp horizon. A cell's stamp is 32 bits of milliseconds since the
// epoch, and atom.Elapsed reads the age as a signed 32-bit
// difference, exact only below 2^31 ms (24.8 days). The sweeper keeps
// every cell within that window without a goroutine:
//
//   - Invariant: every cell's stamp, as an absolute time, is at or after
//     floor, and no operation uses a time at or past floor + 2^31. So every
//     age an operation computes is exact, and the absolute time of a stamp
//     s is floor + uint32(s - stamp(floor)).
//   - Once the time reaches due = floor + 2^30 (12.4 days), a sweep starts
//     at that time T: every cell older than 2^29 ms at T is decayed to T
//     and re-stamped T (empty cells too). Operations help: each one that
//     finds a sweep due takes the next chunk of cells, if no other
//     operation is sweeping at that moment (TryLock), so a busy sketch
//     spreads the sweep over many operations. When the last chunk is done,
//     floor becomes T - 2^29 and due T + 2^29.
//   - An operation whose time is at or past floor + 2^31 (the sketch was
//     idle, or the clock jumped) cannot trust any age: it waits for the
//     sweep lock and finishes the sweep itself (re-basing every cell to
//     its own time if needed) before it proceeds.
//   - Stale operations. An operation reads its time once, then loads
//     cells; if the clock jumps meanwhile and another operation re-bases
//     the cells to a time 2^31 ms or more past it, a 32-bit age would
//     read such a stamp as a large positive age (over-decay). So every
//     stamp in a cell, now or later until low next rises, is below
//     low + 2^31: low is the floor, raised before an urgent re-base to
//     (its time - 2^31 + 1). After loading words, an operation checks
//     its time against low (fresh); a stale one takes the clock's
//     current reading as its time, which is at or past every stamp any
//     re-base wrote, so each stamp ahead of it reads as zero elapsed.
//     Words loaded before the check stay valid for the new time: low
//     only grows.
//
// The cost on the hot path is one load of due, on a line that is written
// once per sweep (every 6.2 days of clock time).
const (
	horizonWindow = int64(1) << 31 // ages below this are exact
	sweepDue      = int64(1) << 30 // a sweep starts this long after floor
	sweepKeep     = int64(1) << 29 // cells younger than this at T are left alone
	sweepChunk    = 16384          // cells per helping step
)

// SweepKeep is sweepKeep for the packages that answer waits from a
// sketch (redis's deny cache and fallback): a cell the horizon sweep
// re-stamps is at least this old, so a debt that drains within it is
// never swept while it lasts.
const SweepKeep = sweepKeep

// sweeper is a sketch's horizon state (see above).
type sweeper struct {
	floor atomic.Int64 // no cell's stamp is older than this; Sketch.due is floor + sweepDue
	mu    sync.Mutex   // held while sweeping a chunk
	// Guarded by mu:
	active bool  // a sweep is under way
	at     int64 // its time T
	next   int   // the next cell to sweep
}

// initHorizon sets the state of a sketch whose cells are all stamped ms.
func (s *Sketch) initHorizon(ms int64) {
	s.sweep.floor.Store(ms)
	s.due.Store(addSat(ms, sweepDue))
	s.raiseLow(ms)
}

// raiseLow raises low to at least x (it never falls).
func (s *Sketch) raiseLow(x int64) {
	for {
		l := s.low.Load()
		if x <= l || s.low.CompareAndSwap(l, x) {
			return
		}
	}
}

// fresh reports whether an operation at *ms may use the words it has
// just loaded. If *ms has fallen below low (a re-base moved past it
// while the operation ran), it sets *ms to the clock's current reading
// (after the horizon work that reading needs) and returns false: words
// loaded before the call are still safe to use at the new *ms, words
// loaded after it are checked again by the caller. One load of a line
// written once per sweep.
func (s *Sketch) fresh(ms *int64) bool {
	if *ms >= s.low.Load() {
		return true
	}
	s.refresh(ms)
	return false
}

// refresh is fresh's slow path: *ms becomes the clock's reading, after
// the horizon work that reading needs.
//
//go:noinline
func (s *Sketch) refresh(ms *int64) {
	*ms = s.nowMillis()
	s.maintain(*ms)
}

// maintain keeps the horizon invariant for an operation at time ms. It is
// cheap (one load and compare) unless a sweep is due.
func (s *Sketch) maintain(ms int64) {
	if ms < s.due.Load() {
		return
	}
	s.maintainSlow(ms)
}

//go:noinline
func (s *Sketch) maintainSlow(ms int64) {
	sw := &s.sweep
	// Spans saturate (subSat, addSat): a clock that crossed most of the
	// int64 ms range between two operations (a fake clock set from
	// before 1970 to its end) must read as past the window, not wrap to
	// "not urgent" (audit 140), and a due near the end must not wrap to a
	// sweep on every operation.
	if subSat(ms, sw.floor.Load()) < horizonWindow {
		if s.due.Load() == math.MaxInt64 {
			// Saturated: floor is within sweepDue of the clock's last
			// millisecond, so no age can reach the window and no sweep
			// is ever needed (the clock reads MaxInt64 at most).
			return
		}
		// Due but not urgent: help with one chunk if nobody else is
		// sweeping right now, else carry on.
		if sw.mu.TryLock() {
			// Deferred: the sweep calls the decay law, and a custom
			// law that panics must not leave the lock held (every
			// later sweep, and every operation past the window, would
			// block on it).
			defer sw.mu.Unlock()
			s.sweepStep(ms, 1)
		}
		return
	}
	// Past the window: no age can be trusted until the sweep is done.
	sw.mu.Lock()
	defer sw.mu.Unlock()
	// The re-base below may stamp cells at ms, 2^31 ms or more past the
	// time of an operation still in flight: make such an operation stale
	// before the first such stamp is written.
	s.raiseLow(subSat(ms, horizonWindow-1))
	for subSat(ms, sw.floor.Load()) >= horizonWindow {
		s.sweepStep(ms, -1)
	}
}

// sweepStep sweeps up to chunks chunks (all of them if chunks < 0),
// starting a sweep at time ms if none is under way. Caller holds mu.
func (s *Sketch) sweepStep(ms int64, chunks int) {
	sw := &s.sweep
	if !sw.active {
		if ms < s.due.Load() {
			return // another operation finished it meanwhile
		}
		sw.active, sw.at, sw.next = true, ms, 0
	}
	floor := sw.floor.Load()
	for chunks != 0 && sw.next < len(s.cells) {
		end := min(sw.next+sweepChunk, len(s.cells))
		s.rebase(s.cells[sw.next:end], floor, sw.at)
		sw.next = end
		chunks--
	}
	if sw.next == len(s.cells) {
		sw.active = false
		floor := subSat(sw.at, sweepKeep)
		sw.floor.Store(floor)
		s.due.Store(addSat(floor, sweepDue))
		s.raiseLow(floor)
	}
}

// rebase decays every cell of cells older than sweepKeep at time at to
// at, and stamps it at (or, under the linear law, a little earlier: see
// atom.Rules.Rebase). floor is the current floor: the stamp s of a cell
// stands for floor + uint32(s - stamp(floor)).
func (s *Sketch) rebase(cells []atom.Cell, floor, at int64) {
	fs, now := s.stamp(floor), s.stamp(at)
	for i := range cells {
		c := &cells[i]
		for {
			w := c.Load()
			abs := floor + int64(w.Stamp()-fs)
			age := subSat(at, abs)
			if age < sweepKeep {
				break // young enough (or written after at by a later operation)
			}
			// The new floor is at - sweepKeep: a stamp back-dated by
			// up to sweepKeep keeps the invariant.
			v, back := s.rules.Rebase(float64(w.Score()), age, sweepKeep)
			st := now
			if back > 0 {
				st = s.stamp(at - back)
			}
			if c.CompareAndSwap(w, atom.Pack(v, st)) {
				break
			}
		}
	}
}
