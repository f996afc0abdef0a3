package core_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Rotator.TryUpdate's godoc: "a call that finds the primary retired
// decides again on the new set". audit14 checks it for a call the retired
// primary would admit; this is the denial side: k's 8 is only in the
// primary (written before the youngest generation existed), and a
// promotion, run from the primary's Load hook (after the call read its
// stripe, before its loads), retires it under the call. The call's loads
// then read a retired primary, whose 8 + 5 > 10 would deny; it must
// decide again on the new primary, which holds nothing of k, and be
// admitted there.
func TestAudit15MutTryUpdateDeniedOnRetiredPrimaryDecidesAgain(t *testing.T) {
	for _, conservative := range []bool{false} { // the conservative path has no Load hook
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r, err := core.NewRotator(core.RotatorConfig{
			Sketch: core.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.None(), Hi: 100, Seed: 5, Clock: clk, Conservative: conservative},
			Period: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		r.UpdateString("k", 8) // G0 and G1
		r.Rotate()             // G1 (8) primary, G2 (0) built now
		old := r.Current().Gens[0]
		rotated := 0
		core.SetHooks(old, core.Hooks{Load: func(uint32) {
			if rotated == 0 {
				rotated++
				r.Rotate()
			}
		}})
		ok := r.TryUpdateString("k", 5, 10)
		if rotated != 1 || r.Current().Gens[0] == old {
			t.Fatalf("conservative %v: the hook did not rotate", conservative)
		}
		if !ok {
			t.Errorf("conservative %v: TryUpdate whose primary retired before its loads was denied on the retired primary (8 + 5 > 10); want it decided again on the new primary (0 + 5 <= 10)", conservative)
		}
		if got := r.QueryString("k"); got != 5 {
			t.Errorf("conservative %v: the new primary holds %v, want 5", conservative, got)
		}
	}
}

// Saturation's godoc: "the probability that a fresh key (one never
// written) is refused delta under limit now: that its aggregate plus
// delta exceeds limit". A cell whose score plus delta equals limit
// admits (TryUpdate's decision is aggregate + delta <= limit), so with
// every cell at exactly limit - delta the answer is 0, and just above it
// 1; TryUpdate of a fresh key agrees.
func TestAudit15MutSaturationBoundaryAdmits(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 1, Decay: decay.None(), Hi: 100, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", 5) // every cell holds 5
	if p := s.Saturation(5, 10, 0, 1); p != 0 {
		t.Errorf("Saturation(5, 10) with every cell at 5 = %v, want 0 (5 + 5 <= 10 admits)", p)
	}
	if p := s.Saturation(5.5, 10, 0, 1); p != 1 {
		t.Errorf("Saturation(5.5, 10) with every cell at 5 = %v, want 1", p)
	}
	if !s.TryUpdateString("fresh", 5, 10) {
		t.Errorf("TryUpdate(fresh, 5, 10) denied with every cell at 5")
	}
}

// a15Linear is a custom law draining 1 per second, with a callback on
// its first evaluation once armed.
type a15Linear struct {
	arm *atomic.Bool
	fn  func()
}

func (l a15Linear) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	if l.arm.CompareAndSwap(true, false) {
		l.fn()
	}
	return max(score-float64(dt)/1000, 0)
}

// The conservative raise (Config.Conservative) lifts a cell to target
// "stamped at the newer of w's stamp and now, as Rules.Apply stamps an
// add". A (cells x, y) holds 3 from T0. A's Update of 12 reads its time
// T1 = T0 + 1 s (A reads 2: target 14), and while it decays its loaded
// words (the law is the one callback between its loads and its raise)
// the clock moves 5 s and B, sharing only x with A, writes 10 at T2. A's
// raise then finds x = 10 stamped T2 and lifts it to 14: stamped T1, the
// 14 would read 9 at T2, below B's true 10.
func TestAudit15MutConservativeRaiseKeepsLaterStamp(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	var s *core.Sketch
	arm := new(atomic.Bool)
	var b string
	law := a15Linear{arm: arm, fn: func() {
		clk.Advance(5 * time.Second)
		s.UpdateString(b, 10)
	}}
	s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e6, Decay: law, Clock: clk, Conservative: true})
	if err != nil {
		t.Fatal(err)
	}
	idx := func(k string) [2]uint32 {
		var ix [2]uint32
		core.Detailed(s, []byte(k), func(level, index uint32, _ float64) int { ix[level] = index; return 0 })
		return ix
	}
	var a string
	for i := 0; a == "" && i < 200; i++ {
		for j := 0; j < 200; j++ {
			ka, kb := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", j)
			ia, ib := idx(ka), idx(kb)
			if ia[0] == ib[0] && ia[1] != ib[1] && core.StripeOf(s, []byte(ka)) != core.StripeOf(s, []byte(kb)) {
				a, b = ka, kb
				break
			}
		}
	}
	if a == "" {
		t.Fatal("setup: no keys with the wanted collision pattern")
	}
	s.UpdateString(a, 3)
	clk.Advance(time.Second)
	arm.Store(true)
	s.UpdateString(a, 12)
	if arm.Load() {
		t.Fatal("setup: B's write did not run")
	}
	if q := s.QueryString(b); q < 10 {
		t.Errorf("Query(B) = %v < B's true 10: A's raise moved x's stamp back", q)
	}
	if q := s.QueryString(a); q < 9 {
		t.Errorf("Query(A) = %v < A's true 9 (14 at T1, drained 5 s)", q)
	}
}
