package core

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/law"
)

// Merge adds other into s under the additive law, cell by cell: both are
// decayed to one common instant (s's current reading; other's cells are
// read at the same instant of other's own time scale), then each of s's
// cells becomes decay(s) + decay(other), clamped to [Lo, Hi] and rounded
// up, in one CAS. other is only read. A cell of other stamped after that
// instant (written during the merge, or on a clock ahead of s's) cannot be
// read at it: a positive score is read back to it by the law's inverse
// (None, Exponential, Linear), at or above its value then for non-negative
// deltas, however far ahead; where the merged sum read back so exceeds Hi,
// the merged cell is Hi stamped the least whole ms after s's instant from
// which Hi stays at or above both parts' decay (as WriteTo states a cell
// read back past Hi). A credit, or a custom law's score, is merged at its
// own stamp's value with the merged cell stamped that far after s's
// instant. A merged cell is stamped at most 2^24 ms (4.66 hours) after s's
// instant: a cell of a replica whose clock is further ahead, or written
// during the merge after a clock jump that long, decays by the excess. A 0
// is not read back (a Linear cell drained to 0 and re-stamped after the
// instant merges as 0), and the clamp at Hi can cost the read-back: a
// write on s after the merge, before a read-back cell's stamp, that
// reaches Hi absorbs it, so the key may read below the union from that
// stamp on by up to other's own value, never below either input
// (docs/snapshots.md, "Merge"). A cell of other whose clock is behind s's
// is decayed by the difference net of its lead, so a write stamped after
// other's reading is not drained away first.
//
// It refuses (a *SnapshotError matching ErrSnapshotMismatch, naming the
// field) a sketch whose Levels, CellsPerLevel, decay law or parameter,
// Lo, Hi, Aggregator, hasher kind, Seed or hasher fingerprint differ:
// only then does a key map to the same cells with the same meaning.
//
// Exactness per law, for replicas that saw disjoint parts of one stream:
//
//   - None and Exponential: decay is linear in the score, so the merged
//     cell is exactly the cell a single sketch fed the union would hold,
//     up to the float32 rounding (upward, one ulp per cell per merge) and
//     the clamp at Hi.
//   - Linear (and custom laws): not exact. A replica's cell drains at the
//     full rate while it is positive, so two replicas drain twice as fast
//     as one sketch fed the union: for non-negative deltas
//     max(a, b) <= a + b <= union, and the union may exceed a + b by up to
//     rate x (the time both cells were positive). Merge takes a + b, which
//     is never below either input's truth (each input is itself >= its
//     key's truth under Min), but can be below the union's: use
//     MergeWithin for the union's safe side. With a negative score on
//     either side, a credit that drains too, the merge takes max(a, b) when
//     a + b would fall below it, so it never falls below either input.
//
// Writes during the merge: a cell written after the merge's instant is
// read back to it (positive scores of None, Exponential and Linear) or
// the merged cell is stamped later, so that the other side decays late:
// the safe side for positive scores. A credit (a negative score) that
// decays late reads low, so with negative writes landing on either
// sketch during the merge a key can read below the union, by up to what
// the credit decays over the lead, a gap that shrinks as it decays
// (audit 88: -20 for -16 under a 1 s half-life, the write landing 1 s
// into the merge).
//
// Merge may run concurrently with operations on s and other: each cell of
// s is merged atomically, the merge as a whole is not (another operation
// may see some cells merged and others not), and other's cells are read
// as WriteTo reads them (one atomic load each, not an atomic set).
// Merging a sketch into itself is refused.
func (s *Sketch) Merge(other *Sketch) error { return s.merge(other, 0) }

// MergeWithin is Merge that, for the Linear law, also adds rate x overlap
// (overlap rounded up to whole ms, the product rounded up) to every cell
// (clamped at Hi), where overlap is at least the time since
// the two replicas started from empty sketches (or, more tightly, the
// time during which both may have held a positive score). Then, for
// non-negative deltas and ignoring the clamp at Hi, every merged cell is
// at or above the cell a single sketch fed the union of both streams
// would hold, so under Min a key's estimate never falls below its union
// truth: the safe side for a debt meter (a rate limiter never admits more
// than the union's limit). Proof: let d = union - (a + b). Arrivals add to
// both sides alike; while the union is positive it drains at rate r, and
// a + b drains at r times the number of positive replicas, so d grows at
// most r per unit of time, and only while both replicas are positive; d
// starts at 0 from empty sketches, so d <= r x overlap.
//
// The cost: every key, the cold ones included, reads up to rate x overlap
// higher than its union truth right after the merge, an excess that
// drains away in overlap time. For None and Exponential, overlap is
// ignored (Merge is already exact). overlap < 0 is treated as 0.
func (s *Sketch) MergeWithin(other *Sketch, overlap time.Duration) error {
	slack := 0.0
	if k, rate := law.Params(s.cfg.Decay); k == law.KindLinear && overlap > 0 {
		// Clocks count whole ms, so 1.9 ms of overlap can span 2 ms of
		// drain: whole ms rounded up (truncated, 1.9 ms raised by 1 ms's
		// worth and a key read below the union: audit 88), and the
		// product rounded up.
		ms := int64(overlap / time.Millisecond)
		if overlap%time.Millisecond != 0 {
			ms++
		}
		slack = mulDivUp(rate, float64(ms), 1000)
	}
	return s.merge(other, slack)
}

// mulDivUp returns a x b / c rounded toward +Inf, for a, b >= 0 and
// c > 0, finite: each rounding's exact error (FMA) says whether to step
// up.
func mulDivUp(a, b, c float64) float64 {
	p := a * b
	if math.FMA(a, b, -p) > 0 {
		p = math.Nextafter(p, math.Inf(1))
	}
	q := p / c
	if math.FMA(q, c, -p) < 0 {
		q = math.Nextafter(q, math.Inf(1))
	}
	return q
}

func (s *Sketch) merge(other *Sketch, slack float64) error {
	s.built()
	other.built()
	if other == s {
		return NewSnapshotError(ErrSnapshotMismatch, "sketch", "Sketch", nil, nil, nil, "Merge of a sketch into itself")
	}
	ho, hs := other.header(0), s.header(0)
	if err := ho.check(&hs, "merged sketch"); err != nil {
		return err
	}
	// One common instant: s's reading msS, and the same instant on
	// other's scale. A shared Timebase needs no conversion. Otherwise
	// other's reading at that instant is its own reading minus the
	// difference of the two times.Time (monotonic within one process,
	// wall across clocks that only have a wall time): if other is behind,
	// its values are decayed the extra gap; if ahead, they are read at an
	// earlier point of its scale. A cell of other written after that
	// instant (during the merge) keeps its lead: the merged cell is
	// stamped as far after msS.
	msS := s.nowMillis()
	s.maintain(msS)
	msO, extra := msS, int64(0)
	if other.tb != s.tb {
		msO = other.nowMillis()
		d := s.tb.Time(msS).Sub(other.tb.Time(msO)).Milliseconds()
		if d >= 0 {
			extra = d
		} else {
			msO += d
		}
	}
	other.maintain(msO)
	// No cell of other is older than its floor: reading it at an instant
	// before the floor is reading every cell at age 0, and keeps each
	// age computed below inside the 2^31 ms window. The cells are then
	// read raised ms after the common instant (other ahead of s by more
	// than its cells' history, a replica created since), a lead every
	// cell carries as one written after it does (audit 49: other 9.3 h
	// ahead, created at its write, merged 50 as 35.7 at the write's
	// instant).
	raised := int64(0)
	if f := other.sweep.floor.Load(); msO < f {
		raised, msO = f-msO, f
	}
	nowS, nowO := s.stamp(msS), other.stamp(msO)
	linear := s.rules.Kind() != law.KindNone && s.rules.Kind() != law.KindExponential
	for l := range int(s.levels) {
		base := l * s.stride
		for i := range int(s.m) {
			wo := other.cells[base+i].Load()
			v0 := float64(wo.Score())
			// net: ms from the cell's stamp to the common instant, on
			// one scale (other behind s by extra; raised ahead). A cell
			// stamped after the instant (net < 0: written during the
			// merge, or before it on a clock ahead of s's) holds its
			// value at that later stamp, which may be below its value
			// at the instant (it decayed since). Decaying it by extra
			// first and reading it back after would lose it where the
			// decay reaches 0 (Linear) or underflows (audit 93): the
			// two are netted. For a positive score of a law with an
			// inverse (None, Exponential, Linear), b is read back to
			// the instant by it (law.Undecay), over the whole lead
			// however far the clock moved (audit 49): at or above the
			// value then, for non-negative deltas, and exactly the
			// union's from the stamp on under None and Exponential
			// (audit 37). Otherwise the merged cell is stamped as far
			// after nowS, at most maxAhead, so b does not decay before
			// it was written (s's own value then decays late: the safe
			// side for writes during the merge).
			//
			// A 0 is not read back, unlike WriteTo's restate: every
			// empty cell of a replica created or swept after the
			// instant is stamped after it, and would read rate x lead
			// (Linear) or, past lambda x lead = 709, Hi (Exponential:
			// 2^-1022 overflowing) in every cell (audit 95). A Linear
			// cell drained to 0 and re-stamped after the instant so
			// merges as 0 (audit 94: it may have held up to rate x lead
			// then; docs/snapshots.md, "Merge").
			net := atom.Elapsed(wo.Stamp(), nowO) + extra - atom.Elapsed(nowO, wo.Stamp()) - raised
			b, ahead, back := v0, uint32(0), int64(0)
			if net >= 0 {
				b = other.rules.Decay(v0, net)
			} else if up, ok := law.Undecay(s.cfg.Decay, v0, -net); ok && v0 > 0 {
				b, back = up, -net
			} else {
				ahead = uint32(min(-net, maxAhead))
			}
			// Adding 0 changes nothing, except under a draining law to a
			// credit (a negative score), which merges with 0 as
			// max(a, 0): skip only a cell that cannot hold one.
			if b == 0 && slack == 0 && (!linear || s.cells[base+i].Load().Score() >= 0) {
				continue
			}
			s.markNegative(b)
			c := &s.cells[base+i]
			for {
				w := c.Load()
				if !s.fresh(&msS) { // a clock jump re-based s meanwhile
					nowS = s.stamp(msS)
				}
				a := s.rules.Value(w, nowS)
				// Each add rounds upward (SumUp), so the merged cell
				// is never below the exact union's value, however far
				// apart a and b are.
				v := atom.SumUp(a, b)
				if linear && (a < 0 || b < 0) {
					v = math.Max(v, math.Max(a, b))
				}
				v = atom.SumUp(v, slack)
				at := nowS + ahead
				if back > 0 && v > s.rules.Hi() {
					// Read back past Hi: clamped at the instant, the
					// merged cell would decay over the lead too early
					// (audit 92). Hi is stamped as late as keeps it at
					// or above both parts' decay from then on: s's (with
					// the slack; a credit under Linear merges as 0, as
					// above) and other's (audit 93: a + b, not b alone).
					// s's own part is held until its own stamp where
					// that is later (written during the merge, or a
					// restored Hi record: audit 94).
					rest := a
					if linear && a < 0 {
						rest = 0
					}
					hold := atom.Elapsed(nowS, w.Stamp())
					at = nowS + uint32(min(s.hiLead(atom.SumUp(rest, slack), hold, v0, back), maxAhead))
				}
				if c.CompareAndSwap(w, atom.Pack(s.rules.Round(v), atom.Newer(w.Stamp(), at))) {
					break
				}
			}
		}
	}
	return nil
}
