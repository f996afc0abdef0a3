package core

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// a110Clock never moves: no decay, one millisecond for the whole test.
type a110Clock struct{}

func (a110Clock) NowMillis() int64 { return 7_000_000 }

// a110Cells returns key's cell index at each level of s.
func a110Cells(s *Sketch, key string) []uint32 {
	_, ls := Detailed(s, []byte(key), func(_, index uint32, _ float64) uint32 { return index })
	return ls
}

// a110Find returns the first key prefix-i whose cells satisfy want and
// whose stripe is not in used (then marked used).
func a110Find(t *testing.T, s *Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) string {
	t.Helper()
	for i := range 200000 {
		k := fmt.Sprintf("%s-%d", prefix, i)
		st := StripeOf(s, []byte(k))
		if used[st] || !want(a110Cells(s, k)) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return ""
}

// a110Wait waits for ch, failing the test after a deadline (no hang).
func a110Wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestAudit110FixedDeniedNegativeTryUpdateThatWaitedSetsFlag (audit 110;
// fixed at stop 61, the text below says what was wrong):
// markNegative's promise (tryupdate.go; docs/design.md, "Roll-backs",
// case 3, as audit 106 fixed it): the flag is "set once, by the first
// negative write that changes a cell, before its CAS: a denied TryUpdate
// of a negative delta ... writes nothing and leaves the flag as it was",
// because once set it turns off exact roll-backs for every key.
//
// tryHold sets the flag as soon as its first verdict is atom.Admit,
// before it has the stripe. When the stripe is held by another admitted
// TryUpdate of the key (seq odd), the call waits, decides again on the
// fresh cells, and is denied: it wrote nothing, and the flag stays set.
//
// Forced: G1 = TryUpdate(k, +1, 100) holds k's stripe (blocked before
// its level-0 CAS); G2 = TryUpdate(k, -0.5, -0.25) reads k's cells at 0
// (0 - 0.5 <= -0.25: Admit), finds the stripe held and waits; G1 commits
// (k reads 1), G2 decides again (1 - 0.5 > -0.25) and is denied. Then an
// exact roll-back of another key is refused: a = TryReserve(a, 3), b
// (sharing a's level-0 cell) Update 4 in the same millisecond, Refund(a)
// reports false and leaves a's 3 in the shared cell, where with the flag
// unset (no negative write ever changed a cell) it subtracts 3 exactly and
// reports true.
func TestAudit110FixedDeniedNegativeTryUpdateThatWaitedSetsFlag(t *testing.T) {
	s, err := New(Config{Levels: 2, CellsPerLevel: 8, Lo: -100, Hi: 100, Clock: a110Clock{}})
	if err != nil {
		t.Fatal(err)
	}
	const k = "k"
	var phase atomic.Int32 // 1: G1 deciding; 2: G2 started
	holding, release, g2Loaded := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	SetHooks(s, Hooks{
		BeforeCAS: func(l uint32) {
			if l == 0 && phase.Load() == 1 {
				once1.Do(func() { close(holding); <-release })
			}
		},
		Load: func(uint32) {
			if phase.Load() == 2 {
				once2.Do(func() { close(g2Loaded) })
			}
		},
	})
	phase.Store(1)
	var ok1, ok2 bool
	done1, done2 := make(chan struct{}), make(chan struct{})
	go func() { defer close(done1); ok1 = s.TryUpdateString(k, 1, 100) }()
	a110Wait(t, holding, "G1 to hold the stripe")
	phase.Store(2)
	go func() { defer close(done2); ok2 = s.TryUpdateString(k, -0.5, -0.25) }()
	a110Wait(t, g2Loaded, "G2 to start")
	// Give G2 its decision on the cells at 0 while G1 holds the stripe:
	// with the defect it sets the flag there; without it, nothing to see.
	for deadline := time.Now().Add(time.Second); !s.negative.Load() && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	close(release)
	a110Wait(t, done1, "G1")
	a110Wait(t, done2, "G2")
	SetHooks(s, Hooks{})
	if !ok1 || ok2 {
		t.Fatalf("G1 admitted %v, G2 admitted %v: want true, false", ok1, ok2)
	}
	_, v := Detailed(s, []byte(k), func(_, _ uint32, x float64) float64 { return x })
	if v[0] != 1 || v[1] != 1 {
		t.Fatalf("k's cells %v; want [1 1] (G2 denied, nothing written)", v)
	}
	flag := s.negative.Load()

	used := map[uint64]bool{StripeOf(s, []byte(k)): true}
	kc := a110Cells(s, k)
	a := a110Find(t, s, "a", used, func(c []uint32) bool { return c[0] != kc[0] && c[1] != kc[1] })
	ac := a110Cells(s, a)
	b := a110Find(t, s, "b", used, func(c []uint32) bool { return c[0] == ac[0] && c[1] != ac[1] && c[1] != kc[1] })
	rcA, okA := s.TryReserveStringAt(s.Timebase().Now(), a, 3, 100)
	if !okA {
		t.Fatal("a's reservation denied")
	}
	s.UpdateString(b, 4)
	all := s.Refund(&rcA)
	_, va := Detailed(s, []byte(a), func(_, _ uint32, x float64) float64 { return x })
	t.Logf("flag after G2's denial %v; a's Refund %v; a's cells after %v (b's 4 shares level 0)", flag, all, va)
	if flag {
		t.Errorf("TryUpdate(k, -0.5, -0.25) was denied and wrote nothing, yet the sketch's negative flag is set (tryHold sets it on its first Admit verdict, before it has the stripe)")
	}
	if !all || va[0] != 4 {
		t.Errorf("Refund(a) = %v, shared cell %v: want true and 4 (b's own 4; a's 3 subtracted exactly: no negative write ever changed a cell)", all, va[0])
	}
}
