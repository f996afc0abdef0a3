package sketch

import (
	"sync"
	"sync/atomic"

	"github.com/lfgrudge/grudge/atomiccell"
)

// The stamp horizon. A cell's stamp is 32 bits of milliseconds since the
// epoch, and atomiccell.Elapsed reads the age as a signed 32-bit
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
//
// The cost on the hot path is one load of due, on a line that is written
// once per sweep (every 6.2 days of clock time).
const (
	horizonWindow = int64(1) << 31 // ages below this are exact
	sweepDue      = int64(1) << 30 // a sweep starts this long after floor
	sweepKeep     = int64(1) << 29 // cells younger than this at T are left alone
	sweepChunk    = 16384          // cells per helping step
)

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
	s.due.Store(ms + sweepDue)
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
	if ms-sw.floor.Load() < horizonWindow {
		// Due but not urgent: help with one chunk if nobody else is
		// sweeping right now, else carry on.
		if sw.mu.TryLock() {
			s.sweepStep(ms, 1)
			sw.mu.Unlock()
		}
		return
	}
	// Past the window: no age can be trusted until the sweep is done.
	sw.mu.Lock()
	for ms-sw.floor.Load() >= horizonWindow {
		s.sweepStep(ms, -1)
	}
	sw.mu.Unlock()
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
		sw.floor.Store(sw.at - sweepKeep)
		s.due.Store(sw.at - sweepKeep + sweepDue)
	}
}

// rebase decays every cell of cells older than sweepKeep at time at to
// at, and stamps it at. floor is the current floor: the stamp s of a cell
// stands for floor + uint32(s - stamp(floor)).
func (s *Sketch) rebase(cells []atomiccell.Cell, floor, at int64) {
	fs, now := s.stamp(floor), s.stamp(at)
	for i := range cells {
		c := &cells[i]
		for {
			w := c.Load()
			abs := floor + int64(w.Stamp()-fs)
			age := at - abs
			if age < sweepKeep {
				break // young enough (or written after at by a later operation)
			}
			v := s.rules.Decay(float64(w.Score()), age)
			if c.CompareAndSwap(w, atomiccell.Pack(s.rules.Round(v), now)) {
				break
			}
		}
	}
}
