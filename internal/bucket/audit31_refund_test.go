package bucket

import (
	"sync/atomic"
	"testing"
)

// TestAudit31FixedRefundCutShortOverAdmits: a Refund of a write larger
// than slack - 2 seal ticks lowers the entry in steps (lower). Between
// two steps the key's entry holds a stamp that is neither the state
// before the Refund (the reservation counted) nor the one after it (the
// reservation given back), and a TryUpdate of the key decides on it. The
// Refund's next step then finds the key written, adds the part already
// given back again and reports false: the reservation stays. So in
// every serial order the TryUpdate ran while the reservation was held,
// and it was admitted past the limit.
//
// Law Linear(1000, 60): u = 1023 ticks a token, span 61,380, slack
// 4,155, seal 512, so a step gives back at most 3,131 ticks (3.06
// tokens). Clock frozen. Update(x, 5), then TryReserve(x, 45, 50) admits
// (debt 50; the Refund must restore the live stamp of 5); Refund
// is held before its second CAS (after the first gave back 3.06 tokens);
// TryUpdate(x, 3, 50) then reads a debt of 46.94 and is admitted. The
// Refund returns false (the 45 stay). Admitted and kept: 53 against a
// limit of 50, with no time passing.
//
// Promises: internal/bucket/doc.go, "Guarantees": "a key at its limit is
// never admitted early" and "Across keys it never over-admits"; Refund's
// doc: it "reports whether it gave the write back" ("Otherwise ... the
// debt stays (never an under-count)"); the brief of c761bf5: "Refund
// returning true means the write was given back exactly, false means
// the debt stays (now also when cut short)". A Query in the same window
// reads below the true load too (one-sided: "Query(k) >= k's true load,
// whatever ... refunds and races").
func TestAudit31FixedRefundCutShortOverAdmits(t *testing.T) {
	e := newTest(t, 2, Linear(1000, 60), nil)
	if e.q.slack-2*e.q.seal >= e.q.units(50) {
		t.Fatalf("law does not need steps: slack %d seal %d", e.q.slack, e.q.seal)
	}
	e.Update("x", 5) // a live entry for the refund to restore: the give-back is in steps
	rc, ok := e.TryReserve("x", 45, 50)
	if !ok || !rc.ok {
		t.Fatalf("TryReserve(x, 45, 50) = %v (refundable %v), want admitted and refundable", ok, rc.ok)
	}
	var calls atomic.Int32
	var midOK bool
	var midQuery float64
	e.setHooks(&testHooks{beforeLower: func() {
		if calls.Add(1) == 2 { // after the first step's CAS, before the second's
			midQuery = e.Query("x")
			midOK = e.TryUpdate("x", 3, 50)
		}
	}})
	refunded := e.Refund(&rc)
	e.setHooks(nil)
	final := e.Query("x")
	t.Logf("mid-refund Query %.4f, TryUpdate(x, 3, 50) admitted %v, Refund %v, final Query %.4f", midQuery, midOK, refunded, final)
	kept := 5.0
	if !refunded {
		kept += 45
	}
	if midOK {
		kept += 3
	}
	if kept > 50 {
		t.Errorf("admitted and kept %v tokens against a limit of 50 with the clock frozen (5, then a reservation of 45, Refund returned %v; TryUpdate(x, 3, 50) admitted %v after reading %.4f mid-refund); want at most 50: doc.go: \"a key at its limit is never admitted early\", Refund: false means the debt stays", kept, refunded, midOK, midQuery)
	}
	if !refunded && midQuery < 50 {
		t.Errorf("Query(x) during a Refund that returned false read %.4f, below the key's true load 50 (the reservation stayed): doc.go: \"One-sided: Query(k) >= k's true load, whatever ... refunds and races\"", midQuery)
	}
}
