package limit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The roll-backs of limit (Reservation.Cancel, Multi's refund of the
// windows that admitted) must never give back another key's debt, even
// once MaxDebt has cut that key's debit: a key that drove its own debt to
// MaxDebt is denied exactly as long as it would be alone. Every key
// shares one cell per level here (WithSize(2, 1)), and a twin limiter
// that never saw the rolled-back reservation is the truth.

// TestCancelAfterMaxDebtCut: X reserves a token, Y's rejected requests
// (RejectCost 1) drive the shared cells to MaxDebt, X cancels. Before the
// exact roll-back, X's Cancel subtracted its token from the cells at
// MaxDebt and Y got through a second early.
func TestCancelAfterMaxDebtCut(t *testing.T) {
	for _, cu := range []bool{false, true} {
		testCancelAfterMaxDebtCut(t, limit.WithConservativeUpdate(cu))
	}
}

func testCancelAfterMaxDebtCut(t *testing.T, cu limit.Option) {
	opts := []limit.Option{limit.WithSize(2, 1), limit.WithMaxDebt(5), limit.WithRejectCost(1), cu}
	l, clk := newFake(t, 1, 1, opts...)
	twin, tclk := newFake(t, 1, 1, opts...)
	r := l.ReserveN(clk.Now(), "x", 1)
	if !r.OK() {
		t.Fatal("X's reservation refused")
	}
	for range 10 { // Y: denied, each denial charging 1, up to MaxDebt
		l.AllowN(clk.Now(), "y", 1)
		twin.AllowN(tclk.Now(), "y", 1)
	}
	r.Cancel()
	got, want := l.PeekN(clk.Now(), "y", 1), twin.PeekN(tclk.Now(), "y", 1)
	if got.RetryAfter < want.RetryAfter {
		t.Fatalf("after X's Cancel, Y may retry in %v; alone it waits %v: X's Cancel gave back Y's debt", got.RetryAfter, want.RetryAfter)
	}
}

// hookClock is a fake clock that runs a function once, at the first read
// after it is armed: a pause point inside an operation of the limiter
// that reads it.
type hookClock struct {
	*sketchtest.FakeClock
	hook atomic.Pointer[func()]
}

func (c *hookClock) NowMillis() int64 {
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return c.FakeClock.NowMillis()
}

// TestMultiRefundAfterMaxDebtCut: a Multi whose first window admits and
// second denies refunds the first; if another key's rejected requests
// drove the first window's shared cells to MaxDebt in between (run here
// from the second window's clock read, inside the Multi's call), the
// refund must not take x's token out of them: the other key stays denied
// exactly as long as it would alone.
func TestMultiRefundAfterMaxDebtCut(t *testing.T) {
	for _, cu := range []bool{false, true} {
		testMultiRefundAfterMaxDebtCut(t, limit.WithConservativeUpdate(cu))
	}
}

func testMultiRefundAfterMaxDebtCut(t *testing.T, cu limit.Option) {
	opts := []limit.Option{limit.WithSize(2, 1), limit.WithMaxDebt(5), limit.WithRejectCost(1), cu}
	first, clk := newFake(t, 1, 1, opts...)
	twin, tclk := newFake(t, 1, 1, opts...)
	hc := &hookClock{FakeClock: clk}
	second, err := limit.New(1, 1, limit.WithClock(hc), limit.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(first, second)
	if err != nil {
		t.Fatal(err)
	}
	if !second.AllowN(clk.Now(), "x", 1) { // the second window is now full for x
		t.Fatal("second window denied on an empty limiter")
	}
	clk.Advance(time.Millisecond)
	tclk.Advance(time.Millisecond)
	yRejected := func() {
		for range 10 { // Y: denied, each denial charging 1, up to MaxDebt
			first.AllowN(clk.Now(), "y", 1)
			twin.AllowN(tclk.Now(), "y", 1)
		}
	}
	hc.hook.Store(&yRejected) // between x's take in the first window and the second's denial
	if m.AllowN(clk.Now(), "x", 1) {
		t.Fatal("Multi admitted x past the second window")
	}
	if hc.hook.Load() != nil {
		t.Fatal("the second window never read its clock (test setup)")
	}
	got, want := first.PeekN(clk.Now(), "y", 1), twin.PeekN(tclk.Now(), "y", 1)
	if got.RetryAfter < want.RetryAfter {
		t.Fatalf("after Multi's refund Y may retry in %v; alone it waits %v: the refund gave back Y's debt", got.RetryAfter, want.RetryAfter)
	}
}
