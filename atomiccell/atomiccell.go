package atomiccell

import (
	"fmt"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/law"
)

// Word is a packed cell value: float32 score bits in the high half, uint32
// stamp in the low half. The zero Word is score +0 at stamp 0.
type Word uint64

// Pack builds a Word from a score and a stamp. score must not be NaN or Inf
// (use RoundUp to narrow).
func Pack(score float32, stamp uint32) Word { return Word(atom.Pack(score, stamp)) }

// Score returns the stored float32 score.
func (w Word) Score() float32 { return atom.Word(w).Score() }

// Stamp returns the stored age stamp (ms relative to the owner's epoch,
// modulo 2^32).
func (w Word) Stamp() uint32 { return atom.Word(w).Stamp() }

// Elapsed returns the milliseconds from stamp to now, computed modulo 2^32
// as a signed difference; a difference <= 0 (backwards clock, or an idle
// time past the 2^31 ms horizon) is 0.
func Elapsed(stamp, now uint32) int64 { return atom.Elapsed(stamp, now) }

// Newer returns the later of stamp and now in modular order: now if it is
// ahead of stamp, else stamp. It keeps stamps from moving backwards.
func Newer(stamp, now uint32) uint32 { return atom.Newer(stamp, now) }

// RoundUp narrows x to float32, rounding toward +Inf, so the result is
// never below x. Values beyond the float32 range saturate at ±MaxFloat32,
// so the result is always finite. NaN is returned as NaN (a caller's
// error).
func RoundUp(x float64) float32 { return atom.RoundUp(x) }

// Cell is one lock-free cell. The zero Cell holds score 0 at stamp 0 and
// is ready to use. A Cell is safe for concurrent use; it must not be
// copied after first use.
type Cell struct {
	c atom.Cell
}

// Load returns the cell's current word.
func (c *Cell) Load() Word { return Word(c.c.Load()) }

// Store overwrites the cell. It is for resets and tests: concurrent
// updates in flight are lost.
func (c *Cell) Store(w Word) { c.c.Store(atom.Word(w)) }

// CompareAndSwap replaces old with new if the cell still holds old.
func (c *Cell) CompareAndSwap(old, new Word) bool {
	return c.c.CompareAndSwap(atom.Word(old), atom.Word(new))
}

// Add applies delta at time now under r with a CAS loop, backing off
// after a lost race, and returns the word it stored. w is the caller's
// last view of the cell (a Load); a stale word costs a retry. delta must
// be finite (a NaN delta panics; ±Inf clamps to the bounds). Lock-free:
// each failed CAS means another update succeeded.
// An add that leaves the word unchanged (a score pinned at Hi or Lo, or
// a zero delta, at the same stamp) writes nothing once a load inside the
// call has seen the cell hold that word, and returns it.
func (c *Cell) Add(r *Rules, now uint32, delta float64, w Word) Word {
	if delta != delta {
		panic(errNaNDelta)
	}
	return Word(c.c.Add(&r.r, now, delta, atom.Word(w)))
}

// errNaNDelta is the panic value of an Add or Next with a NaN delta: it
// would store a NaN score, which every later add keeps.
const errNaNDelta = "atomiccell: delta is NaN"

// Rules is what a cell update needs besides the cell: the decay law and
// the clamp bounds. A Rules is immutable after NewRules and safe for
// concurrent use.
type Rules struct {
	r atom.Rules
}

// NewRules builds Rules for law d (nil means decay.None()) and bounds
// [lo, hi], each rounded up to float32 (an infinite bound saturates at
// ±MaxFloat32). Preconditions (sketch.New checks them for a Config):
// lo <= 0 <= hi, lo < hi, neither NaN, and d valid. NewRules panics,
// naming what is wrong, when they do not hold: a NaN bound would never
// clamp, and an Add would store ±Inf; a law with a NaN or Inf parameter
// (decay.Exponential(NaN)) would decay a score to NaN.
func NewRules(d decay.Decay, lo, hi float64) *Rules {
	if !(lo <= 0 && 0 <= hi && lo < hi) { // false for a NaN bound too
		panic(fmt.Sprintf("atomiccell: NewRules: bounds [%v, %v]; want lo <= 0 <= hi, lo < hi, neither NaN", lo, hi))
	}
	if err := law.Validate(d); err != nil {
		panic(fmt.Sprintf("atomiccell: NewRules: decay law: %v", err))
	}
	return &Rules{r: *atom.NewRules(d, lo, hi)}
}

// Next returns the word w becomes at time now after adding delta: w's
// score decayed for its age, plus delta, clamped to the bounds, rounded
// up (the least float32 at or above the exact sum, clamped: a delta the
// float64 add would absorb still steps it up), at the newer of w's stamp
// and now.
func (r *Rules) Next(w Word, now uint32, delta float64) Word {
	if delta != delta {
		panic(errNaNDelta)
	}
	return Word(r.r.Next(atom.Word(w), now, delta))
}

// Value returns w's score decayed to now, in float64, on the safe side
// (never below the law's own result).
func (r *Rules) Value(w Word, now uint32) float64 { return r.r.Value(atom.Word(w), now) }
