package atom

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

// Contention backoff schedule (docs/design.md, "Hot keys and backoff",
// has the measurements behind it). A lost CAS means another core holds
// the line and is updating it; retrying at once pulls the line back
// mid-streak, and on a hot key both cores then pay a line transfer on
// every operation. Waiting a few of the winner's operation times lets it
// run them on lines that stay in its cache: throughput through
// unfairness, which sync.Mutex's spin phase gets too. The first wait is
// 32 Pause calls; rounds double up to 1024, so many cores on one line
// spread out (every loss means some other core made progress).
const (
	contendedFirst = 32
	contendedMax   = 1024
)

// contention is the schedule ContentionBackoff hands out and spinOnLoss
// whether Cell's own CAS loops spin after a lost race: 32/1024 and on by
// default, the zero asm.Backoff and off under -tags grudge_nobackoff.
// Only SetContentionBackoff changes them, before any sketch is used.
var (
	contention = defaultContention()
	spinOnLoss = useBackoff
)

func defaultContention() asm.Backoff {
	if !useBackoff {
		return asm.Backoff{}
	}
	return asm.NewBackoff(contendedFirst, contendedMax)
}

// ContentionBackoff returns the backoff a writer uses after losing a race
// on a hot cell: asm.NewBackoff(32, 1024). Under -tags grudge_nobackoff
// (or after SetContentionBackoff(0, 0)) it is the zero asm.Backoff (1 to
// 64 Pause calls), which waiters on a held stripe still need to make
// progress; Cell's own CAS loops do not spin at all then.
func ContentionBackoff() asm.Backoff { return contention }

// SetContentionBackoff replaces the contention backoff's schedule: the
// first round spins first Pause calls and rounds double up to limit
// (asm.NewBackoff's clamps apply). first == 0 turns it off, as -tags
// grudge_nobackoff does: lost cell CASes retry at once and stripe waiters
// get the zero asm.Backoff. It exists for the benchmark harness's
// schedule sweep (bench/cmd/matrix -backoff) and must be called before
// any sketch is used: it is not safe concurrently with operations.
func SetContentionBackoff(first, limit uint32) {
	if first == 0 {
		contention, spinOnLoss = asm.Backoff{}, false
		return
	}
	contention, spinOnLoss = asm.NewBackoff(first, limit), true
}

// ResetContentionBackoff restores the build's contention backoff, as
// before any SetContentionBackoff; the same caveat applies.
func ResetContentionBackoff() { contention, spinOnLoss = defaultContention(), useBackoff }

// Add applies delta at time now under r with a CAS loop and returns the
// word it stored (or found already equal). w is the caller's last view of
// the cell (a Load); passing a stale word is allowed and costs a retry
// and one round of backoff. delta must be finite. Lock-free: each failed
// CAS means another update succeeded. An add that leaves the word as it
// is (a score pinned at Hi or Lo at the same stamp, a zero delta) stores
// nothing: it loads the cell once more, and if the cell still holds w the
// add took effect at that load.
func (c *Cell) Add(r *Rules, now uint32, delta float64, w Word) Word {
	return c.add(r, now, delta, w)
}

// Backoff is the wait after a lost CAS race in an owner's own CAS loop:
// one round of bo (see ContentionBackoff), or none under -tags
// grudge_nobackoff, as in Add.
func Backoff(bo *asm.Backoff) {
	if spinOnLoss {
		bo.Spin()
	}
}

// add is Add's loop, out of line: the schedule is fetched here so that
// Add (and atomiccell's Add over it) stays within the inlining budget.
func (c *Cell) add(r *Rules, now uint32, delta float64, w Word) Word {
	bo := ContentionBackoff()
	for {
		nw := r.Next(w, now, delta)
		if nw == w {
			// Nothing to write, if the cell still holds w. w may be the
			// caller's stale view, so only a load made inside this call
			// proves it (as a CAS from w to w would, without taking the
			// line exclusive): the add then takes effect at that load
			// (docs/design.md, "No write when nothing changes").
			if Word(c.w.Load()) == w {
				return w
			}
		} else if c.w.CompareAndSwap(uint64(w), uint64(nw)) {
			return nw
		}
		if spinOnLoss {
			// Lost the race: let the winner keep the line for a
			// while before pulling it back (see contendedFirst).
			bo.Spin()
		}
		w = Word(c.w.Load())
	}
}
