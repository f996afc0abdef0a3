package bucket

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31RefundStepsAcrossLongMove: a Refund given back in steps
// (lower: at most slack - 2 seal ticks a CAS) whose step is held after
// its read and before its CAS (beforeLower) while the line's time moves
// by a gap (a long move: moving bit, steps, seals), with the neighbour
// entry of the refunded slot's word live (the step's CAS then succeeds
// across the move) or empty (the seal changes the word: the CAS fails
// and the step reads again). Law Linear(1000, 60): 1,023 ticks a ms and
// a token, slack 4,155, seal 512. x owes 5, then reserves 45 (stamp 50
// tokens ahead); the refund must restore 5. After it, x must read
// exactly its true load, max(5 - gap, 0) tokens (Refund true) or, if it
// reports false, at least max(50 - gap, 0); and every filler entry its
// own. Promises: doc.go, "Refund (of a TryReserve) is an exact undo";
// "One-sided"; design.md, "no entry is ever read against a window it is
// not in".
func TestAudit31RefundStepsAcrossLongMove(t *testing.T) {
	for _, gap := range []int64{1, 2, 3, 5, 8, 20, 44, 49, 51, 70, 3000} {
		for _, live := range []bool{false, true} {
			for _, at := range []int32{1, 2, 7} { // which step is held
				t.Run(fmt.Sprintf("gap%d/live%v/step%d", gap, live, at), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					e := newTest(t, 2, Linear(1000, 60), clk)
					e.Update("x", 5)
					rc, ok := e.TryReserve("x", 45, 50)
					if !ok || !rc.ok {
						t.Fatal("reservation refused")
					}
					li := int(rc.line)
					_, _, fp := e.Locate("x")
					// Fillers: every other slot of x's line, live for 30 ms
					// (or only the slots outside x's word when !live).
					nb := int(rc.slot) ^ 1
					for s := 0; s < SlotsPerLine; s++ {
						if s == int(rc.slot) || (!live && s == nb) {
							continue
						}
						fill(e, li, s, 1, fp, uint64(10+2*s))
					}
					before := StateOf(e, li)
					t0 := NowMs(e)
					var calls atomic.Int32
					e.setHooks(&testHooks{beforeLower: func() {
						if calls.Add(1) == at {
							clk.Advance(time.Duration(gap) * time.Millisecond)
							e.moveLine(&e.lines[li], t0+uint64(gap))
						}
					}})
					ok = e.Refund(&rc)
					e.setHooks(nil)
					got := e.Query("x")
					var want float64
					if ok {
						want = math.Max(5-float64(gap), 0)
						if math.Abs(got-want) > 1e-9 {
							t.Errorf("Refund true; x reads %v at +%d ms, want exactly %v", got, gap, want)
						}
					} else {
						want = math.Max(50-float64(gap), 0)
						if got < want-1e-9 {
							t.Errorf("Refund false; x reads %v at +%d ms, below its true load %v", got, gap, want)
						}
					}
					if got > 60 {
						t.Errorf("x reads %v: a phantom", got)
					}
					// Fillers: each reads its own load less the gap.
					after := StateOf(e, li)
					now := Tick(e)
					for s := 0; s < SlotsPerLine; s++ {
						if before.FP[s] == 0 || s == int(rc.slot) {
							continue
						}
						wantS := uint64(0)
						if before.Stamp[s] > now {
							wantS = before.Stamp[s]
						}
						gotS := uint64(0)
						for k := 0; k < SlotsPerLine; k++ {
							if after.FP[k] == before.FP[s] && after.Stamp[k] > now {
								gotS = after.Stamp[k]
							}
						}
						if gotS != wantS {
							t.Errorf("filler slot %d (fp %#x): live stamp %d after, want %d (before %d, now %d)", s, before.FP[s], gotS, wantS, before.Stamp[s], now)
						}
					}
					t.Logf("Refund %v, x reads %v (want %v), lower steps %d", ok, got, want, calls.Load())
				})
			}
		}
	}
}
