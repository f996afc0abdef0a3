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

// a132Cells returns key's per-level scores in s.
func a132Cells(s *core.Sketch, key []byte) []float64 {
	_, ls := core.Detailed(s, key, func(_, _ uint32, score float64) float64 { return score })
	return ls
}

// a132DistinctStripes returns n keys on n different TryUpdate stripes.
func a132DistinctStripes(s *core.Sketch, n int) [][]byte {
	seen := map[uint64]bool{}
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		k := []byte(fmt.Sprintf("a132-%d", i))
		if st := core.StripeOf(s, k); !seen[st] {
			seen[st] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// TestAudit132RefundDuringColliderCommit runs a whole Refund while a
// colliding TryUpdate on another stripe is held between its CASes.
// (Refund calls no hook of its own: the Rollback hook fires only in a
// commit's undo, so the Refund cannot itself be held between levels.)
// L=3, M=1 (every key's estimate is the total), no decay, a frozen clock.
//
//	TryReserve(X, 1): (1,1,1); Update(W, 1): (2,2,2)
//	Z = TryUpdate(z, 1, 3) decides on 2, CASes c0 to 3, is held
//	Refund(X): every level written since, same ms, below Hi: subtract
//	  -> (2,1,1); reports true
//	Z's CAS on c1 (from 2) fails; Z's undo of c0 subtracts -> (1,1,1);
//	Z decides again on 1 and commits (2,2,2)
//
// design.md ("the roll-back", case 3): exact; the cells end at the
// truth W + Z = 2 and no read in between is below the truth.
func TestAudit132RefundDuringColliderCommit(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 1, Hi: 100, Decay: decay.None(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	keys := a132DistinctStripes(s, 3)
	x, w, z := keys[0], keys[1], keys[2]
	rc, ok := s.TryReserveAt(clk.Now(), x, 1, 10)
	if !ok {
		t.Fatal("X's reservation denied on 0")
	}
	s.Update(w, 1)
	reached, release := make(chan struct{}), make(chan struct{})
	before1, conflicts, undos := 0, 0, 0
	core.SetHooks(s, core.Hooks{
		BeforeCAS: func(l uint32) {
			if l == 1 {
				before1++
				if before1 == 1 {
					close(reached)
					<-release
				}
			}
		},
		Conflict: func(uint32) { conflicts++ },
		Rollback: func(uint32) { undos++ },
	})
	done := make(chan bool)
	go func() { done <- s.TryUpdate(z, 1, 3) }()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("Z never reached its CAS on c1")
	}
	if got := a132Cells(s, x); got[0] != 3 || got[1] != 2 || got[2] != 2 {
		t.Fatalf("Z held after c0: cells %v, want [3 2 2]", got)
	}
	if !s.Refund(&rc) {
		t.Error("Refund(X) reported false: every level was written since only in the same ms, below Hi")
	}
	if got := a132Cells(s, x); got[0] != 2 || got[1] != 1 || got[2] != 1 {
		t.Errorf("after the Refund, cells %v, want [2 1 1] (W, plus Z's c0)", got)
	}
	if q := s.Query(w); q < 1 {
		t.Errorf("Query(w) = %v below W's truth 1", q)
	}
	close(release)
	if !<-done {
		t.Fatal("Z denied: it decides again on 1 with limit 3")
	}
	if conflicts != 1 || undos != 1 {
		t.Errorf("Z met %d conflicts and %d undos, want 1 and 1", conflicts, undos)
	}
	if got := a132Cells(s, x); got[0] != 2 || got[1] != 2 || got[2] != 2 {
		t.Errorf("cells end at %v, want [2 2 2] (W + Z)", got)
	}
	// "clears rc, so a second Refund does nothing. The zero Receipt
	// refunds nothing and reports true."
	if !s.Refund(&rc) {
		t.Error("a second Refund (of the cleared receipt) reported false")
	}
	if got := a132Cells(s, x); got[0] != 2 || got[1] != 2 || got[2] != 2 {
		t.Errorf("a second Refund changed the cells to %v", got)
	}
}

// a132GateLaw is the None law as a custom law (the slow path), whose
// first Apply with dt > 0 after arm blocks until release.
type a132GateLaw struct {
	armed   chan struct{} // closed by arm
	reached chan struct{}
	release chan struct{}
	taken   *atomic.Bool
}

func (g a132GateLaw) Apply(score float64, dt int64) float64 {
	select {
	case <-g.armed:
		if dt > 0 && g.taken.CompareAndSwap(false, true) {
			close(g.reached)
			<-g.release
		}
	default:
	}
	return score
}

// TestAudit132ConservativeUpdateWaitsForStripe holds a conservative
// Update(k, 1) inside its read of k's cells (a custom decay law blocks
// there) and runs a second Update(k, 1) meanwhile. design.md,
// "Conservative update": "What a lock-free raise can lose is a
// concurrent write of the same key (two writers reading est = 0 both
// raise to delta). So every conservative write takes the key's TryUpdate
// stripe ... reads the key's cells under it". The second Update must not
// complete while the first holds the stripe, and after the release the
// key must read both: 1 (before) + 1 + 1 = 3. A Query meanwhile (no
// stripe) reads 1.
func TestAudit132ConservativeUpdateWaitsForStripe(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	g := a132GateLaw{armed: make(chan struct{}), reached: make(chan struct{}), release: make(chan struct{}), taken: new(atomic.Bool)}
	s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: g, Clock: clk, Conservative: true})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 1)
	clk.Advance(5 * time.Millisecond)
	seq0 := core.StripeSeq(s, k)
	close(g.armed)
	first, second := make(chan struct{}), make(chan struct{})
	go func() { s.Update(k, 1); close(first) }()
	select {
	case <-g.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Update never read its cells")
	}
	if seq := core.StripeSeq(s, k); seq != seq0+1 {
		t.Errorf("stripe seq %d while the conservative Update reads, want %d (held)", seq, seq0+1)
	}
	go func() { s.Update(k, 1); close(second) }()
	select {
	case <-second:
		t.Fatal("a second conservative Update(k) completed while the first held k's stripe")
	case <-time.After(100 * time.Millisecond):
	}
	if q := s.Query(k); q != 1 {
		t.Errorf("Query mid-Update = %v, want 1", q)
	}
	close(g.release)
	for _, ch := range []chan struct{}{first, second} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("a conservative Update never completed after the release")
		}
	}
	if q := s.Query(k); q != 3 {
		t.Errorf("Query after both = %v, want 3 (no write of the key lost)", q)
	}
	if seq := core.StripeSeq(s, k); seq != seq0+4 {
		t.Errorf("stripe seq %d after two writes, want %d", seq, seq0+4)
	}
}
