package bucket

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31FixedRefundCutByMovePhantom: a Refund given back in steps
// whose partly lowered entry expires, and is cleared by a long move of
// its line (another key's write), before its next step, reports false
// and adds the part already given back to the key again at the line's
// new time, although no write of the key landed. The key, whose
// reservation drained long ago, then owes that part: a phantom debt, and
// a key far below its limit is denied.
//
// Law Linear(1000, 60) (one token a ms; a step gives back 3.06 tokens).
// x owes 5; TryReserve(x, 45, 50) (debt 50, drained after 50 ms); Refund
// gives back 6 steps (18.36 tokens) and is held before its 7th; the clock
// moves 3 s and another key's write moves x's line (a long move whose
// seal clears x's entry, expired). The Refund finds the entry gone,
// returns false and re-adds 18.36 tokens at t0 + 3 s. x's true load at
// t0 + 3 s is 0 whether the refund happened or not (the whole 50
// drained after 50 ms), yet x reads 18.36, and TryUpdate(x, 35, 50) is
// denied.
//
// Promises: op.go Refund: "when a write of the key lands between two of
// them, the part already given back is added to the key again" (no
// write of x landed); commit c761bf5: "a Refund cut short by a
// concurrent write of the key adds the part already given back again";
// doc.go/design.md: a key alone far below its limit is not denied and
// reads no phantom (TestAudit8LaggingTimeHighWater and the stands stress
// tests "now assert no phantom and no denial of a lone key").
func TestAudit31FixedRefundCutByMovePhantom(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(1000, 60), clk)
	e.Update("x", 5)
	rc, ok := e.TryReserve("x", 45, 50)
	if !ok || !rc.ok {
		t.Fatal("reservation refused")
	}
	li := uint64(rc.line)
	_, _, xfp := e.Locate("x")
	var other string
	for i := 0; ; i++ {
		other = "o" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if i0, _, fp := e.Locate(other); i0 == li && fp != xfp {
			break
		}
	}
	var calls atomic.Int32
	e.setHooks(&testHooks{beforeLower: func() {
		if calls.Add(1) == 7 {
			clk.Advance(3 * time.Second)
			e.Update(other, 1) // another key's write: moves x's line to t0 + 3 s
		}
	}})
	refunded := e.Refund(&rc)
	e.setHooks(nil)
	got := e.Query("x")
	okTry := e.TryUpdate("x", 35, 50)
	t.Logf("Refund %v after %d steps; x reads %v at t0 + 3 s; TryUpdate(x, 35, 50) %v", refunded, calls.Load(), got, okTry)
	if got != 0 || !okTry {
		t.Errorf("x, whose every write drained 2.95 s ago (true load 0 whether or not the Refund took effect), reads %v at t0 + 3 s and TryUpdate(x, 35, 50) admitted = %v (want 0 and true); Refund returned %v although no write of x landed: op.go Refund re-adds the part given back only \"when a write of the key lands between two of them\"; c761bf5: no phantom and no denial of a lone key", got, okTry, refunded)
	}
}
