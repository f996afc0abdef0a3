package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 87 (limit/Multi, the new take order). The take order moved the
// windows whose take may not come back (a conservative count-min, a
// policy whose burst is its MaxDebt) after the others, so a first window
// of that kind no longer takes first. The precheck then still read every
// window after the first only, so when the first window was the one that
// denied, the later (refundable) windows had already taken, and the
// denial's refund did not always give their takes back whole.
//
// NewMulti's doc (limit/multi.go) then said: "put the most likely to
// deny first: a denial there takes nothing". Multi's doc: "a denial by
// any window gives back what the windows before it took (all of it,
// unless a concurrent request touched the same cells, or made a later
// window deny after a take that cannot come back...)"; and now: "Every
// window but the one that takes first is read before anything is taken,
// and a request one of them denies takes nothing".
//
// A Buckets window's take that had to evict another key's entry (both of
// the key's lines full) is not given back whole: its Cancel leaves the
// eviction floor it raised (reserve.go, Cancel). So, serially, with no
// concurrent request at all, a first window of the unrefundable kind
// that denied left debt in a later Buckets window whose lines were full.
//
// Fixed: the precheck now reads every window but the one that takes
// first (takeOrder's order[0]), so a first window of the keeps kind is
// read before anything is taken, and its denial takes nothing. The tests
// below are regression tests of that.

// audit87LmFirstKinds are first windows whose take may not come back
// (the kind that now takes last), and refundable controls, which still
// take first: for them the denial takes nothing.
var audit87LmFirstKinds = []struct {
	name  string
	opts  []limit.Option
	keeps bool
}{
	{"count-min/conservative", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(true)}, true},
	{"buckets/maxdebt=burst", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithMaxDebt(1)}, true},
	{"count-min/maxdebt=burst", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(1)}, true},
	{"buckets/control", []limit.Option{limit.WithEngine(limit.Buckets)}, false},
	{"count-min/control", []limit.Option{limit.WithEngine(limit.CountMin)}, false},
}

// audit87LmFullLines builds a Buckets window of the fewest lines
// (WithCapacity(1, 0.5)) and fills it with fillers one token each, as
// long as the probe key still reads no debt (no eviction floor on its
// lines). It returns the window and the number of fillers, once a take
// of probe would have to evict: a fresh limiter with the same fillers is
// reserved for probe and cancelled, and the probe then reads debt.
func audit87LmFullLines(t *testing.T, fc *sketchtest.FakeClock, seed uint64, probe string) (*limit.Limiter, int) {
	t.Helper()
	build := func(fillers int) (*limit.Limiter, bool) {
		w := limit.MustNew(1, 2, limit.WithEngine(limit.Buckets), limit.WithCapacity(1, 0.5),
			limit.WithSeed(seed), limit.WithClock(fc), limit.WithName("buckets"))
		now := fc.Now()
		for i := range fillers {
			if !w.AllowN(now, fmt.Sprint("filler-", i), 1) {
				return nil, false
			}
		}
		return w, w.TokensAt(now, probe) == 2
	}
	for fillers := 0; fillers < 80; fillers++ {
		w, clean := build(fillers)
		if !clean {
			return nil, 0
		}
		r := w.ReserveN(fc.Now(), probe, 1)
		if !r.OK() {
			t.Fatalf("seed %d: the probe's reservation was refused", seed)
		}
		r.Cancel()
		if w.TokensAt(fc.Now(), probe) < 2 {
			// A take of probe now evicts: rebuild it clean.
			w, _ = build(fillers)
			return w, fillers
		}
	}
	return nil, 0
}

// TestAudit87LmFixedFirstWindowDenialLeavesEvictionFloor: windows
// [first, buckets], one key k. k owes the first window its whole burst
// (1 of 1), so the first window denies; the Buckets window has room for
// k (k reads no debt), but both of k's lines are full of other keys'
// entries, so a take of k there evicts one. The Multi must deny and, the
// denier being the first window, take nothing from the Buckets window:
// k must still read 2 tokens there. What was wrong, on the unrefundable
// kinds: the Buckets window took first (the take order puts the first
// window last) and the precheck never read the first window, so the
// denial came at the first window's take, its refund of the Buckets take
// left the eviction floor, and k read 1 token (a key denied, nothing
// ever admitted, owed a token). What fixed it: the precheck reads every
// window but the one that takes first (here the Buckets window), so the
// first window denies on that read and nothing is taken. The refundable
// controls take first and always took nothing.
func TestAudit87LmFixedFirstWindowDenialLeavesEvictionFloor(t *testing.T) {
	for _, first := range audit87LmFirstKinds {
		t.Run(first.name, func(t *testing.T) {
			found := false
			for seed := uint64(1); seed <= 40 && !found; seed++ {
				fc := sketchtest.NewFakeClock()
				fc.Set(1 << 30)
				const k = "k"
				bw, fillers := audit87LmFullLines(t, fc, seed, k)
				if bw == nil {
					continue
				}
				found = true
				now := fc.Now()
				opts := append([]limit.Option{limit.WithSeed(seed), limit.WithClock(fc), limit.WithName("first")}, first.opts...)
				fw := limit.MustNew(1, 1, opts...)
				if !fw.AllowN(now, k, 1) {
					t.Fatal("setup: the first window denied k's only token")
				}
				m, err := limit.NewMulti(fw, bw)
				if err != nil {
					t.Fatal(err)
				}
				d := m.DecideKeys(now, 1, k)
				if d.Allowed {
					t.Fatalf("admitted past the first window's full burst: %+v", d)
				}
				if d.Policy != "first" {
					t.Errorf("denied by %q; want %q", d.Policy, "first")
				}
				if got := bw.TokensAt(now, k); got != 2 {
					t.Errorf("seed %d, %d fillers: after a Multi denial by its first window, k reads %v tokens in the Buckets window; had 2 "+
						"(Multi: \"a request one of them denies takes nothing\"; a denial \"gives back what the windows before it took (all of it, "+
						"unless a concurrent request touched the same cells...)\")", seed, fillers, got)
				}
				if !bw.AllowN(now, k, 2) {
					t.Errorf("seed %d: a direct request of k's whole burst in the Buckets window is denied after a Multi denial that took nothing", seed)
				}
			}
			if !found {
				t.Fatal("setup: no seed gave a Buckets window whose lines are full with no floor")
			}
		})
	}
}

// audit87LmClasses returns one key of each of the four cell classes of
// a count-min of 2 levels x 2 cells (keys of a class share both cells),
// found by probing fresh limiters: two keys share a class iff a take of
// one is read by the other.
func audit87LmClasses(t *testing.T, mk func() *limit.Limiter) []string {
	t.Helper()
	var reps []string
	for i := 0; i < 200 && len(reps) < 4; i++ {
		x := fmt.Sprint("c", i)
		same := false
		for _, r := range reps {
			w := mk()
			now := w.Now()
			w.AllowN(now, x, 1)
			if w.TokensAt(now, r) < 2 {
				same = true
				break
			}
		}
		if !same {
			reps = append(reps, x)
		}
	}
	if len(reps) != 4 {
		t.Fatalf("setup: found %d cell classes of 4", len(reps))
	}
	return reps
}

// TestAudit87LmFixedFirstWindowDenialRaisesCollidingKey: the same
// defect on a count-min second window (refundable: default MaxDebt). A
// count-min roll-back never takes an increment out of a cell the take
// stored at Hi (internal/core, rollback: "stored at Hi: never"). In a
// count-min of 2 x 2 cells, k's one cell s (shared with a key p, whose
// other cell u is at Hi through a third key y) holds 3 of MaxDebt 4
// (p's burst of 2 and a RejectCost of 1), k's other cell 0: k reads 0
// debt and fits. Windows [first, count-min], k owes the first window its
// whole burst, so the first window denies. What was wrong: the first
// window's take came last and the precheck did not read it, so the
// count-min window took k first (s to Hi), and its refund left s at Hi:
// p, denied nothing and asking nothing, read a debt of 4, had 3. What
// fixed it: the precheck reads every window but the one that takes first
// (the count-min window), so the first window denies on that read and
// nothing is taken. With the first window refundable (it takes first)
// nothing was ever taken.
func TestAudit87LmFixedFirstWindowDenialRaisesCollidingKey(t *testing.T) {
	for _, first := range audit87LmFirstKinds {
		t.Run(first.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1 << 30)
			mk := func() *limit.Limiter {
				return limit.MustNew(1, 2, limit.WithEngine(limit.CountMin), limit.WithSize(2, 2), limit.WithRejectCost(1),
					limit.WithSeed(7), limit.WithClock(fc), limit.WithName("cm"))
			}
			k, y, p := audit87LmSplitClasses(t, mk, audit87LmClasses(t, mk))
			cm := mk()
			now := fc.Now()
			// p: 2 admitted + RejectCost 1 in s and u; y: the same in u
			// (clamped at 4) and in its own other cell.
			for _, key := range []string{p, y} {
				if !cm.AllowN(now, key, 2) || cm.AllowN(now, key, 1) {
					t.Fatalf("setup: %s's burst and its denial", key)
				}
			}
			if got := cm.TokensAt(now, k); got != 2 {
				t.Fatalf("setup: k reads %v tokens; want 2", got)
			}
			before := cm.TokensAt(now, p)
			if before != -1 {
				t.Fatalf("setup: p reads %v tokens; want -1", before)
			}
			opts := append([]limit.Option{limit.WithSeed(8), limit.WithClock(fc), limit.WithName("first")}, first.opts...)
			fw := limit.MustNew(1, 1, opts...)
			if !fw.AllowN(now, k, 1) {
				t.Fatal("setup: the first window denied k's only token")
			}
			m, err := limit.NewMulti(fw, cm)
			if err != nil {
				t.Fatal(err)
			}
			if d := m.DecideKeys(now, 1, k); d.Allowed || d.Policy != "first" {
				t.Fatalf("Decision %+v; want a denial by the first window", d)
			}
			if got := cm.TokensAt(now, k); got != 2 {
				t.Errorf("k reads %v tokens in the count-min window after the denial; had 2", got)
			}
			if got := cm.TokensAt(now, p); got != before {
				t.Errorf("after k's Multi denial by its first window, another key p reads %v tokens in the count-min window; had %v "+
					"(Multi: \"a request one of them denies takes nothing\")", got, before)
			}
		})
	}
}

// audit87LmSplitClasses returns, of the four classes, k (the first), y
// (the class sharing no cell with k: k and y together make the other two
// classes read their takes) and p (one of the other two: it shares one
// cell with k and the other with y).
func audit87LmSplitClasses(t *testing.T, mk func() *limit.Limiter, reps []string) (k, y, p string) {
	t.Helper()
	k = reps[0]
	for i, c := range reps[1:] {
		w := mk()
		now := w.Now()
		w.AllowN(now, k, 1)
		w.AllowN(now, c, 1)
		var others []string
		for j, o := range reps[1:] {
			if j != i {
				others = append(others, o)
			}
		}
		if w.TokensAt(now, others[0]) < 2 && w.TokensAt(now, others[1]) < 2 {
			y, p = c, others[0]
		}
	}
	if y == "" {
		t.Fatal("setup: no class disjoint from k's")
	}
	return k, y, p
}
