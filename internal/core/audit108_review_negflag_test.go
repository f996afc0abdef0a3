package core

import (
	"fmt"
	"testing"
	"time"
)

// a108Clock never moves: no decay, one millisecond for the whole test.
type a108Clock struct{}

func (a108Clock) NowMillis() int64 { return 5_000_000 }

// a108Cells returns key's cell index at each level of s.
func a108Cells(s *Sketch, key string) []uint32 {
	_, ls := Detailed(s, []byte(key), func(_, index uint32, _ float64) uint32 { return index })
	return ls
}

// a108Find returns the first key prefix-i whose cells satisfy want and
// whose stripe is not in used (then marked used).
func a108Find(t *testing.T, s *Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) string {
	t.Helper()
	for i := range 100000 {
		k := fmt.Sprintf("%s-%d", prefix, i)
		st := StripeOf(s, []byte(k))
		if used[st] || !want(a108Cells(s, k)) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return ""
}

// TestAudit108FixedNegativeHoldConflictLeavesFlagUnset (audit 108; fixed at
// stop 61, the text below says what was wrong): markNegative's promise
// (tryupdate.go; docs/design.md, "Roll-backs", case 3) is that a writer
// sets the sketch's negative flag "before its first CAS that changes a
// cell", on every write path, because a roll-back that finds a cell
// written since at the same stamp subtracts its increment only while the
// flag is unset (a negative write can cut at Lo, which a later add does
// not restore).
//
// tryHold sets the flag only when its first verdict is atom.Admit. The
// rotator's primary decides with hold, and there an AdmitSame (every
// level pinned at Lo at the same stamp: a negative delta changes
// nothing) does not take the read-only path: it takes the stripe and
// commits through commitHeld, whose put only checks each level. When a
// colliding writer changed a cell meanwhile, commitConflict decides
// again on the fresh snapshot and CASes the negative delta into that
// cell, with the flag still unset.
//
// Forced: C = Rotator.TryUpdate(c, -5, 100) on cells at 0 (Lo); at C's
// first put, A = TryReserve(a, 3) on a key sharing C's level-0 cell
// (another stripe) commits 3 there; C's check fails, its retry lowers
// the cell 3 -> 0 (cut at Lo) and is admitted. Then Update(b, 4) on a key
// sharing that cell (0 -> 4, and 4 in b's own level-1 cell), and A's
// Refund finds its level-0 cell written since, same millisecond, below
// Hi, flag unset: it subtracts 3 and leaves 1 there, b's own mass
// minus A's 3 that C's Lo clamp had already thrown away. b reads 1 for
// its own 4 ("never another key's mass": Refund), and Refund reports
// true. With the flag set (as every other path would have), A's level 0
// keeps its 3 (case 4: an over-estimate), b reads 4, Refund reports
// false.
func TestAudit108FixedNegativeHoldConflictLeavesFlagUnset(t *testing.T) {
	r, err := NewRotator(RotatorConfig{
		Sketch:      Config{Levels: 2, CellsPerLevel: 8, Lo: 0, Hi: 100, Clock: a108Clock{}},
		Generations: 2, Period: time.Hour, Manual: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := r.cur.Load().gens[0]
	used := map[uint64]bool{}
	c := a108Find(t, p, "c", used, func([]uint32) bool { return true })
	cc := a108Cells(p, c)
	a := a108Find(t, p, "a", used, func(x []uint32) bool { return x[0] == cc[0] && x[1] != cc[1] })
	ca := a108Cells(p, a)
	b := a108Find(t, p, "b", used, func(x []uint32) bool { return x[0] == cc[0] && x[1] != cc[1] && x[1] != ca[1] })

	r.UpdateString(c, 0) // C's cells: 0 (Lo) stamped now, so -5 changes nothing there
	if p.negative.Load() {
		t.Fatal("flag set before any negative write")
	}
	var rcA Receipt
	var okA bool
	fired, skipped := false, false
	inC := true
	SetHooks(p, Hooks{
		BeforeCAS: func(l uint32) {
			if !inC || l != 0 || fired {
				return
			}
			fired = true
			inC = false
			rcA, okA = p.TryReserveStringAt(p.Timebase().Now(), a, 3, 100)
			inC = true
		},
		Skip: func(l uint32) {
			if inC && l == 0 {
				skipped = true
			}
		},
	})
	okC := r.TryUpdateString(c, -5, 100)
	inC = false
	SetHooks(p, Hooks{})
	if !fired || !okA || !okC || !skipped {
		t.Fatalf("hook fired %v, A admitted %v, C admitted %v, C's level 0 checked as unchanged %v: want all", fired, okA, okC, skipped)
	}
	if _, v := Detailed(p, []byte(a), func(_, _ uint32, s float64) float64 { return s }); v[0] != 0 {
		t.Fatalf("after C the shared cell reads %v; want 0 (A's 3 lowered by C's -5, cut at Lo)", v[0])
	}
	flag := p.negative.Load()
	r.UpdateString(b, 4)
	all := p.Refund(&rcA)
	q := r.QueryString(b)
	t.Logf("negative flag after C's admitted -5 %v; A's Refund %v; b reads %v", flag, all, q)
	if !flag {
		t.Errorf("C's admitted TryUpdate(-5) changed a cell (3 -> 0) through commitConflict on the hold path, and the sketch's negative flag is still unset")
	}
	if q < 4 {
		t.Errorf("b wrote 4 alone after C's negative write, and reads %v after A's Refund (which reported %v): the roll-back subtracted A's 3, which C's Lo clamp had already removed, from b's mass", q, all)
	}
}
