package bucket

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a89bkLive returns the live entries of s at tick t (stamp after t), and
// whether an entry of s carries fp and is live.
func a89bkLive(s LineState, t uint64, fp uint16) (live int, cand bool) {
	for k := range SlotsPerLine {
		if s.FP[k] != 0 && s.Stamp[k] > t {
			live++
			if s.FP[k] == fp {
				cand = true
			}
		}
	}
	return live, cand
}

// TestAudit89BucketsFillHoldsEverySlot fills a 40-line engine (560
// slots) with keys in debt, one at a time, at a fake clock that moves
// 0-2 ms a key, and checks each write against the rules of
// internal/bucket/doc.go ("target := fp's first entry; else a free slot
// (empty or expired) of the line with fewer live entries; else the entry
// whose eviction raises its line's floor least"; "an entry is evicted
// only when both of a new key's lines are full of live entries, and the
// evicted stamp is folded into its line's floor first, so no key's load
// ever leaves the table"):
//
//   - a key with a free slot in either line evicts nothing (no floor
//     moves) and lands in the line with fewer live entries (line 0 on a
//     tie);
//   - a key whose two lines are full raises exactly one floor, to the
//     least max(floor, stamp) over the 28 entries;
//   - so the table holds as many keys in entries as it has slots: the
//     live entries count up by one per new key until some key's lines
//     are both full, and then stay at most 560;
//   - every key written reads at least its exact debt (never admitted
//     early), evicted or not.
func TestAudit89BucketsFillHoldsEverySlot(t *testing.T) {
	const lines = 40
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, lines, Linear(10, 40), clk)
	rng := rand.New(rand.NewPCG(89, 4))
	type held struct {
		key  string
		ms   int64
		debt float64 // at ms
	}
	var keys []held
	evictions, firstFull := 0, -1
	liveTotal := func(tk uint64) int {
		n := 0
		for i := range lines {
			l, _ := a89bkLive(StateOf(e, i), tk, 0)
			n += l
		}
		return n
	}
	for k := range 1500 {
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
		key := fmt.Sprintf("fill-%d", k)
		i0, i1, fp := e.Locate(key)
		tk := Tick(e)
		s0, s1 := StateOf(e, int(i0)), StateOf(e, int(i1))
		live0, c0 := a89bkLive(s0, tk, fp)
		live1, c1 := a89bkLive(s1, tk, fp)
		before := liveTotal(tk)
		n := float64(20 + rng.IntN(21)) // 20..40 tokens: 2..4 s of debt
		e.Update(key, n)
		keys = append(keys, held{key, clk.NowMillis(), n})
		a0, a1 := StateOf(e, int(i0)), StateOf(e, int(i1))
		switch {
		case c0 || c1:
			// A fingerprint twin's entry: written in place.
			if a0.Floor != s0.Floor || a1.Floor != s1.Floor {
				t.Fatalf("key %d: a write onto a candidate moved a floor", k)
			}
		case live0 < SlotsPerLine || live1 < SlotsPerLine:
			if a0.Floor != s0.Floor || a1.Floor != s1.Floor {
				t.Fatalf("key %d: lines with %d and %d live entries of %d: a floor moved (%d->%d, %d->%d); want no eviction", k, live0, live1, SlotsPerLine, s0.Floor, a0.Floor, s1.Floor, a1.Floor)
			}
			n0, _ := a89bkLive(a0, tk, 0)
			n1, _ := a89bkLive(a1, tk, 0)
			want0, want1 := live0+1, live1
			if live1 < live0 {
				want0, want1 = live0, live1+1
			}
			if n0 != want0 || n1 != want1 {
				t.Fatalf("key %d: lines held %d and %d live entries, now %d and %d; want %d and %d (the line with fewer)", k, live0, live1, n0, n1, want0, want1)
			}
			if got := liveTotal(tk); got != before+1 {
				t.Fatalf("key %d: %d live entries before, %d after; want one more", k, before, got)
			}
		default:
			evictions++
			if firstFull < 0 {
				firstFull = k
			}
			least := ^uint64(0)
			for _, s := range []LineState{s0, s1} {
				for j := range SlotsPerLine {
					least = min(least, max(s.Floor, s.Stamp[j]))
				}
			}
			r0, r1 := a0.Floor != s0.Floor, a1.Floor != s1.Floor
			switch {
			case r0 && r1:
				t.Fatalf("key %d: both lines full: both floors raised (%d->%d, %d->%d); want one", k, s0.Floor, a0.Floor, s1.Floor, a1.Floor)
			case r0 && a0.Floor != least, r1 && a1.Floor != least:
				t.Fatalf("key %d: floors %d->%d and %d->%d; want the raised one at the least max(floor, stamp), %d", k, s0.Floor, a0.Floor, s1.Floor, a1.Floor, least)
			case !r0 && !r1 && least != s0.Floor && least != s1.Floor:
				t.Fatalf("key %d: both lines full, no floor raised (%d, %d); want one raised to %d", k, s0.Floor, s1.Floor, least)
			}
			if got := liveTotal(tk); got != before {
				t.Fatalf("key %d: an eviction: %d live entries before, %d after; want the same", k, before, got)
			}
		}
		// Every key written so far reads at least its exact debt.
		if k%50 == 49 || k == 1499 {
			now := clk.NowMillis()
			for _, h := range keys {
				exact := h.debt - float64(now-h.ms)/100
				if got := e.Query(h.key); got < exact-1e-9 {
					t.Fatalf("after key %d: %s reads %v; its exact debt is %v", k, h.key, got, exact)
				}
			}
		}
	}
	if firstFull < 0 || evictions == 0 {
		t.Fatalf("no key met two full lines in 1500 (want the fill past the cliff)")
	}
	t.Logf("first eviction at key %d (%.2f keys per slot); %d evictions", firstFull, float64(firstFull)/float64(lines*SlotsPerLine), evictions)
}
