package bucket

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit8StaleCASAfterQuery: the documented limit of an operation's
// time (docs/design.md, section 3, "What is linearizable": "An
// operation's time is its clock read"). A = TryUpdate(x, 20, 20) reads
// the clock at t0 and is held before its CAS (a preempted goroutine).
// The clock moves to T = t0 + 1.5 s and Query(x) reads 0 at T (A's take
// is not in the table yet). A's CAS then writes its stamp counted from
// t0, so at T it reads 5 tokens, and B = TryUpdate(x, 15, 20) at T is
// admitted: at the instant T the key read 0 and then took 35 under a
// limit of 20. No serial order at T gives that; A taking effect at t0,
// after a Query at T, does, and the excess is exactly what drained from
// A's debt between its clock read and T (15 tokens in 1.5 s at 10/s).
// Sub-test "builtOn": B builds on A's entry before A validates (A
// admitted as built on); "afterValidation": B runs after A returned.
// The mutex reference reads its clock before it locks: the same. (The
// audit asserted the serial order; this asserts the documented bound.)
func TestAudit8StaleCASAfterQuery(t *testing.T) {
	for _, builtOn := range []bool{true, false} {
		name := "afterValidation"
		if builtOn {
			name = "builtOn"
		}
		t.Run(name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, Linear(10, 40), clk)
			pausedA, resumeA := make(chan struct{}), make(chan struct{})
			pausedV, resumeV := make(chan struct{}), make(chan struct{})
			var armV atomic.Bool
			e.setHooks(&testHooks{beforeCAS: pauseOnce(armedTrue(), pausedA, resumeA), afterCAS: pauseOnce(&armV, pausedV, resumeV)})
			var aOK bool
			var wg sync.WaitGroup
			wg.Go(func() { aOK = e.TryUpdate("x", 20, 20) })
			<-pausedA
			clk.Advance(1500 * time.Millisecond)
			q0 := e.Query("x")
			var bOK bool
			if builtOn {
				armV.Store(true)
				close(resumeA)
				<-pausedV
				bOK = e.TryUpdate("x", 15, 20)
				close(resumeV)
				wg.Wait()
			} else {
				close(resumeA)
				wg.Wait()
				bOK = e.TryUpdate("x", 15, 20)
			}
			q1 := e.Query("x")
			if q0 != 0 || !aOK || !bOK || q1 != 20 {
				t.Fatalf("Query at T before A's CAS %v; A %v, B %v; Query after %v: want 0, A and B admitted (A counted from t0: 5 left at T), 20", q0, aOK, bOK, q1)
			}
		})
	}
}

// TestAudit8BuiltOnCompensationReadsClock: every operation here is an
// ...At with an explicit time t0 + a few ms, while the engine's clock
// reads an hour later (a caller replaying request timestamps, or whose
// t lags the clock: "a t before a time already used counts as that
// time", and nothing used the clock's reading). A = TryUpdateAt(t0, x,
// 20) is built on by B = TryUpdateAt(t0 + 50 ms, x, 1) before it
// validates, so A is admitted by builtOn, whose compensation is an
// Update at the clock's reading (now = true), not at the operations'
// time: it moves the lines and the Timebase's high-water mark an hour
// ahead. C = TryUpdateAt(t0 + 100 ms, x, 19, 20) must be denied: x owes
// 21 tokens less 1 drained (or more, with the compensation) at
// t0 + 100 ms, and 20 + 19 > 20. Before builtOn, A was denied (keeping its write) and C
// was denied too.
func TestAudit8BuiltOnCompensationReadsClock(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	const t0ms = 1_000_000
	clk.Set(t0ms)
	t0 := time.UnixMilli(t0ms)
	e := newTest(t, 2, Linear(10, 40), clk)
	clk.Advance(time.Hour) // the clock runs ahead of the callers' t
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterCAS: pauseOnce(armedTrue(), paused, resume)})
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { aOK = e.TryUpdateAt(t0, "x", 20, 20) })
	<-paused
	if !e.TryUpdateAt(t0.Add(50*time.Millisecond), "x", 1, 40) {
		t.Fatal("B denied")
	}
	close(resume)
	wg.Wait()
	hw := e.Timebase().HighWater()
	qa := e.QueryAt(t0.Add(100*time.Millisecond), "x")
	cOK := e.TryUpdateAt(t0.Add(100*time.Millisecond), "x", 19, 20)
	t.Logf("A admitted %v; high-water %+d ms from t0; x reads %v at t0+100ms; C admitted %v", aOK, hw-t0ms, qa, cOK)
	if cOK {
		t.Fatalf("C = 19 tokens admitted at t0+100ms under limit 20 while x owed ~20 (the high-water mark moved %d ms past t0 without any caller using that time)", hw-t0ms)
	}
}

// TestAudit8BuiltOnReservedSerial: ReserveN's claim is that racing
// reservations of one key get exactly the delays of a serial order,
// from Engine.Reserved. A = TryReserve(x, 1) at t0 (x fresh, 10/s)
// writes and is held before its validation; the clock moves 50 ms; B =
// TryReserve(x, 1) at T = t0 + 50 ms builds on A's entry; A is admitted
// by builtOn. The serial orders: A@t0 then B@T gives A (t0, 1 token), B
// (T, 1.5), x at T 1.5; A@T then B@T gives A (T, 1), B (T, 2), x 2; B
// then A, both @T: B (T, 1), A (T, 2), x 2. The pair Reserved reports
// (and the load x keeps) must be one of them.
func TestAudit8BuiltOnReservedSerial(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	t0 := e.msOf(NowMs(e))
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterCAS: pauseOnce(armedTrue(), paused, resume)})
	var ra Receipt
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { ra, aOK = e.TryReserve("x", 1, 40) })
	<-paused
	clk.Advance(50 * time.Millisecond)
	rb, bOK := e.TryReserve("x", 1, 40)
	close(resume)
	wg.Wait()
	if !aOK || !bOK {
		t.Fatalf("A %v, B %v", aOK, bOK)
	}
	msA, la := e.Reserved(&ra)
	msB, lb := e.Reserved(&rb)
	q := e.Query("x")
	type rep struct {
		a, b   int64
		la, lb float64
		q      float64
	}
	got := rep{msA - t0, msB - t0, la, lb, q}
	orders := []rep{{0, 50, 1, 1.5, 1.5}, {50, 50, 1, 2, 2}, {50, 50, 2, 1, 2}}
	near := func(x, y float64) bool { return x-y < 1e-3 && y-x < 1e-3 }
	for _, o := range orders {
		if o.a == got.a && o.b == got.b && near(o.la, got.la) && near(o.lb, got.lb) && near(o.q, got.q) {
			return
		}
	}
	t.Fatalf("Reserved A (+%d ms, %v), B (+%d ms, %v), x reads %v at T: no serial order (want one of %+v)", got.a, got.la, got.b, got.lb, got.q, orders)
}
