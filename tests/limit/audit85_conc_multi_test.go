package limit_test

// Audit 85 (concurrency): Multi's all-or-nothing promise under forced
// interleavings. A window's clock is wrapped so that the first read after
// it is armed runs a function: a pause point inside the Multi's call,
// between its precheck of the later windows and its take of the first
// (the first window's first clock read of the call), or between its take
// of the first window and its take of the second (the second window's
// second read). The "concurrent" request runs there, on the same
// goroutine: a deterministic interleaving, no sleeps.
//
// limit/multi.go (Multi's doc): "A request is admitted only if every
// window admits it; a denial by any window gives back what the windows
// before it took (all of it, unless a concurrent request touched the same
// cells: see below)." ... "Every window after the first is read before
// anything is taken, and a request one of them denies takes nothing ...:
// a take that filled a window to MaxDebt (with MaxDebt = burst, any take
// that empties it) never comes back ... what remains is the race at the
// boundary (a take that another caller's admission lands on, by the caller
// that window then denies). A concurrent reader can therefore observe, for
// the moment between a take and its refund, the debit of a request that
// ends up denied: it can only make that reader deny more, never admit
// more."

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit85concHookClock runs its armed function once, at the first
// NowMillis after arming (after skip further reads), then reads the fake
// clock.
type audit85concHookClock struct {
	*sketchtest.FakeClock
	skip  atomic.Int32
	hook  atomic.Pointer[func()]
	fired atomic.Bool
}

func (c *audit85concHookClock) NowMillis() int64 {
	if c.hook.Load() != nil {
		if c.skip.Add(-1) < 0 {
			if f := c.hook.Swap(nil); f != nil {
				c.fired.Store(true)
				(*f)()
			}
		}
	}
	return c.FakeClock.NowMillis()
}

func (c *audit85concHookClock) arm(skip int32, f func()) {
	c.fired.Store(false)
	c.skip.Store(skip)
	c.hook.Store(&f)
}

var audit85concEngines = []limit.Engine{limit.Buckets, limit.CountMin}

func audit85concEngineOpts(e limit.Engine, seed uint64) []limit.Option {
	o := []limit.Option{limit.WithSeed(seed)}
	if e == limit.CountMin {
		return append(o, limit.WithSize(4, 4096))
	}
	return append(o, limit.WithEngine(e))
}

// TestAudit85ConcMultiPrecheckRaceUnrefundableTakesLast: windows (user,
// tenant), DecideKeys(t, 1, "u", "T"). The user window has MaxDebt =
// burst = 2 (or a conservative count-min) and u already owes 1, so a
// take of it could never come back. The precheck reads the tenant
// window: room. Then, before the tenant window's take, another caller's
// admission fills it (on the tenant's key only), and the tenant window
// denies. Audit 85 found the user window's take kept (the Multi took
// windows in order); since stop 56 a window whose take may not come back
// takes after the others (Multi's doc), so the user window took nothing.
// Asserted for every variant: u has exactly the tokens it had; the
// controls (default MaxDebt, taken in order) give the take back exactly.
// The case of two such windows, where the first of them keeps its take,
// is in limit's multiorder test.
func TestAudit85ConcMultiPrecheckRaceUnrefundableTakesLast(t *testing.T) {
	variants := []struct {
		name  string
		user  []limit.Option
		keeps bool // a take of the user window may not come back: it takes last
	}{
		{"buckets/maxdebt=burst", append(audit85concEngineOpts(limit.Buckets, 1), limit.WithMaxDebt(2)), true},
		{"count-min/maxdebt=burst", append(audit85concEngineOpts(limit.CountMin, 1), limit.WithMaxDebt(2)), true},
		{"count-min/conservative", append(audit85concEngineOpts(limit.CountMin, 1), limit.WithConservativeUpdate(true)), true},
		// controls: the default MaxDebt (2 x burst), where the take comes back
		{"buckets/control", audit85concEngineOpts(limit.Buckets, 1), false},
		{"count-min/control", audit85concEngineOpts(limit.CountMin, 1), false},
	}
	for _, v := range variants {
		for _, oneKey := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/oneKey=%v", v.name, oneKey), func(t *testing.T) {
				fc := sketchtest.NewFakeClock()
				fc.Set(1 << 30)
				c1 := &audit85concHookClock{FakeClock: fc}
				user := limit.MustNew(1, 2, append(v.user, limit.WithClock(fc), limit.WithName("user"))...)
				tenant := limit.MustNew(1, 2, append(audit85concEngineOpts(limit.CountMin, 2), limit.WithClock(c1), limit.WithName("tenant"))...)
				m, err := limit.NewMulti(user, tenant)
				if err != nil {
					t.Fatal(err)
				}
				uk, tk := "u", "T"
				keys := []string{uk, tk}
				if oneKey {
					tk = uk
					keys = []string{uk}
				}
				now := fc.Now()
				if !user.AllowN(now, uk, 1) {
					t.Fatal("setup: user window denied its first token")
				}
				before := user.TokensAt(now, uk)
				other := func() {
					// another caller, on the tenant window only
					if !tenant.AllowN(now, tk, 2) {
						t.Error("setup: the other caller was denied the tenant's burst")
					}
				}
				// The tenant window's reads in the call: the precheck (read
				// 1), then its take (read 2); when the user window takes
				// last, the tenant takes first and the precheck skips it
				// (its take is read 1).
				skip := int32(1)
				if v.keeps {
					skip = 0
				}
				c1.arm(skip, other)
				d := m.DecideKeys(now.Add(time.Hour), 1, keys...) // a future t: every operation reads the clock
				if !c1.fired.Load() {
					t.Fatal("setup: the tenant window's take never read its clock")
				}
				if d.Allowed {
					t.Fatalf("Multi admitted past the tenant window: %+v", d)
				}
				if d.Policy != "tenant" {
					t.Errorf("denied by %q; want the tenant window, whose take denied", d.Policy)
				}
				if after := user.TokensAt(now, uk); after != before {
					t.Errorf("u has %v tokens in the user window after a denied Multi decision, had %v", after, before)
				}
				if !user.AllowN(now, uk, 1) {
					t.Error("a direct request of u with its token back was denied")
				}
			})
		}
	}
}

// TestAudit85ConcMultiReaderBetweenTakeAndRefund: between the first
// window's take and the second window's denial, a reader of the first
// window's key is denied (it "can only make that reader deny more"); the
// refund then gives the take back whole (the reader wrote nothing: no
// RejectCost), with and without the clock moving under the call, and the
// reader's retry is admitted. A reader that is admitted in that moment
// (Peek) must not be admitted past the window afterwards.
func TestAudit85ConcMultiReaderBetweenTakeAndRefund(t *testing.T) {
	for _, e := range audit85concEngines {
		for _, move := range []time.Duration{0, time.Millisecond, 40 * time.Millisecond} {
			t.Run(fmt.Sprintf("%v/move=%v", e, move), func(t *testing.T) {
				fc := sketchtest.NewFakeClock()
				fc.Set(1 << 30)
				c1 := &audit85concHookClock{FakeClock: fc}
				// w0: 10/s burst 2; w1: 10/s burst 1 on its own clock hook.
				w0 := limit.MustNew(10, 2, append(audit85concEngineOpts(e, 3), limit.WithClock(fc), limit.WithName("w0"))...)
				w1 := limit.MustNew(10, 1, append(audit85concEngineOpts(e, 4), limit.WithClock(c1), limit.WithName("w1"))...)
				m, err := limit.NewMulti(w0, w1)
				if err != nil {
					t.Fatal(err)
				}
				k := "k"
				t0 := fc.Now()
				if !w0.AllowN(t0, k, 1) {
					t.Fatal("setup")
				}
				fc.Advance(time.Millisecond)
				var readerAllowed, peekAllowed bool
				reader := func() {
					if move > 0 {
						fc.Advance(move)
					}
					// the Multi's take left k at 2 of 2 in w0 (less the drain)
					readerAllowed = w0.AllowN(fc.Now(), k, 1)
					peekAllowed = w0.PeekN(fc.Now(), k, 1).Allowed
					// w1 fills now, after the precheck: the Multi's take of w1 denies
					if !w1.AllowN(fc.Now(), k, 1) {
						t.Error("setup: w1 denied")
					}
				}
				// w1's reads in the call: the precheck (read 1), then its take (read 2)
				c1.arm(1, reader)
				d := m.DecideKeys(fc.Now().Add(time.Hour), 1, k) // a future t: every operation reads the clock
				if !c1.fired.Load() {
					t.Fatal("setup: hook never ran")
				}
				if d.Allowed {
					t.Fatalf("admitted past w1: %+v", d)
				}
				end := fc.Now()
				// Truth: w0 holds only the setup's token, drained by the time moved.
				truth := 1 - float64(end.Sub(t0)/time.Millisecond)/100
				if truth < 0 {
					truth = 0
				}
				if readerAllowed {
					truth++
				}
				got := 2 - w0.TokensAt(end, k)
				if got < truth-1e-9 {
					t.Fatalf("w0 reads debt %v for k, truth %v: below the truth", got, truth)
				}
				if readerAllowed && move < 100*time.Millisecond {
					// The reader's admission means the Multi's take was gone by then:
					// only possible if time drained it; with move < 1 token's time
					// it must have been denied.
					t.Errorf("the reader of w0 was admitted between the Multi's take and its refund (move %v): the Multi's take (2 of 2) was not visible", move)
				}
				if peekAllowed && move < 100*time.Millisecond {
					t.Errorf("a Peek of w0 between the take and the refund said Allowed (move %v)", move)
				}
				// The reader wrote nothing (denied, no RejectCost): the take must
				// be given back whole.
				if !readerAllowed && got > truth+1e-9 {
					t.Errorf("w0 reads debt %v for k after the denied Multi, truth %v: the take was not given back though the reader wrote nothing", got, truth)
				}
			})
		}
	}
}
