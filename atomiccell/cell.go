package atomiccell

import (
	"sync/atomic"

	"github.com/lfgrudge/grudge/asm"
)

// Cell is one lock-free sketch cell. The zero Cell holds score 0 at stamp 0
// and is ready to use. A Cell is safe for concurrent use; it must not be
// copied after first use (atomic.Uint64 enforces this under go vet).
type Cell struct {
	w atomic.Uint64 // a Word; never holds a NaN or Inf score
}

// Load returns the cell's current word.
func (c *Cell) Load() Word { return Word(c.w.Load()) }

// Store overwrites the cell. It is for resets and tests: concurrent updates
// in flight are lost.
func (c *Cell) Store(w Word) { c.w.Store(uint64(w)) }

// CompareAndSwap replaces old with new if the cell still holds old.
func (c *Cell) CompareAndSwap(old, new Word) bool {
	return c.w.CompareAndSwap(uint64(old), uint64(new))
}

// backoffAfter is the number of consecutive lost races after which Add
// starts backing off.
const backoffAfter = 3

// Add applies delta at time now under r with a CAS loop and returns the
// word it stored (or found already equal). w is the caller's last view of
// the cell (a Load); passing a stale word is allowed and only costs a
// retry. delta must be finite. Lock-free: each failed CAS means another
// update succeeded.
func (c *Cell) Add(r *Rules, now uint32, delta float64, w Word) Word {
	var bo asm.Backoff
	fails := 0 // consecutive lost races; back off only from backoffAfter on
	for {
		nw := r.Next(w, now, delta)
		// No shortcut for nw == w: w may be stale, and only the CAS
		// proves the cell still holds it.
		if c.w.CompareAndSwap(uint64(w), uint64(nw)) {
			return nw
		}
		if fails++; useBackoff && fails >= backoffAfter {
			// Lost several races in a row: back off (PAUSE,
			// exponentially) before re-reading, so contending cores
			// stop bouncing the line. A loss or two is normal on a hot
			// key and retries at once (on 2 cores, backing off from the
			// first loss cost ~10%: docs/design.md).
			bo.Spin()
		}
		w = Word(c.w.Load())
	}
}
