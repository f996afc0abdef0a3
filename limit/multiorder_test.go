package limit_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// onReadClock runs its armed function once, at the (skip+1)th NowMillis
// after arming, then reads the fake clock: a pause point inside a call,
// for a deterministic interleaving on one goroutine.
type onReadClock struct {
	*sketchtest.FakeClock
	skip atomic.Int32
	hook atomic.Pointer[func()]
}

func (c *onReadClock) NowMillis() int64 {
	if c.hook.Load() != nil && c.skip.Add(-1) < 0 {
		if f := c.hook.Swap(nil); f != nil {
			(*f)()
		}
	}
	return c.FakeClock.NowMillis()
}

func (c *onReadClock) arm(skip int32, f func()) {
	c.skip.Store(skip)
	c.hook.Store(&f)
}

func (c *onReadClock) fired() bool { return c.hook.Load() == nil }

// multiOrderWindow is one window of TestMultiUnrefundableTakesLast: how
// it is built, and whether a take of it may not come back.
type multiOrderWindow struct {
	name  string
	opts  []limit.Option
	keeps bool
}

var multiOrderWindows = []multiOrderWindow{
	{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}, false},
	{"count-min", []limit.Option{limit.WithEngine(limit.CountMin)}, false},
	{"buckets/maxdebt=burst", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithMaxDebt(2)}, true},
	{"count-min/maxdebt=burst", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(2)}, true},
	{"count-min/conservative", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(true)}, true},
}

// TestMultiUnrefundableTakesLast forces, for every pair of window kinds
// and each window as the victim, the race Multi's doc leaves: the
// precheck reads the victim window with room, then another caller fills
// it before its take, so its take denies. Each window's key already owes
// one token of a burst of 2, so the Multi's take of it would empty it.
// The other window's take must then come back exactly, unless both
// windows are of the kind whose take may not come back and the other one
// took first (it keeps its take, on the safe side: one token, never
// more). The victim, whose take denied, names the Decision.
func TestMultiUnrefundableTakesLast(t *testing.T) {
	for _, a := range multiOrderWindows {
		for _, b := range multiOrderWindows {
			for victim := range 2 {
				t.Run(fmt.Sprintf("%s+%s/victim=%d", a.name, b.name, victim), func(t *testing.T) {
					fc := sketchtest.NewFakeClock()
					fc.Set(1 << 30)
					clocks := [2]*onReadClock{{FakeClock: fc}, {FakeClock: fc}}
					kinds := [2]multiOrderWindow{a, b}
					var ws [2]*limit.Limiter
					for i, k := range kinds {
						opts := append([]limit.Option{limit.WithSeed(uint64(i + 1)), limit.WithClock(clocks[i]), limit.WithName(fmt.Sprint("w", i))}, k.opts...)
						ws[i] = limit.MustNew(1, 2, opts...)
					}
					m, err := limit.NewMulti(ws[0], ws[1])
					if err != nil {
						t.Fatal(err)
					}
					now := fc.Now()
					for i, w := range ws {
						if !w.AllowN(now, "k", 1) {
							t.Fatalf("setup: window %d denied its first token", i)
						}
					}
					other := 1 - victim
					before := ws[other].TokensAt(now, "k")
					fill := func() {
						if !ws[victim].AllowN(now, "k", 1) {
							t.Error("setup: the other caller was denied the victim's last token")
						}
					}
					// The window that takes first (the first that can
					// give its take back, else window 0) is not read by
					// the precheck: its take is its first clock read.
					// Any other window's take is its second.
					first := 0
					if kinds[0].keeps && !kinds[1].keeps {
						first = 1
					}
					skip := int32(1)
					if victim == first {
						skip = 0
					}
					clocks[victim].arm(skip, fill)
					d := m.DecideKeys(now.Add(time.Hour), 1, "k") // a future t: every operation reads the clock
					if !clocks[victim].fired() {
						t.Fatal("setup: the victim window's take never read its clock")
					}
					if d.Allowed {
						t.Fatalf("admitted past a full window: %+v", d)
					}
					after := ws[other].TokensAt(now, "k")
					// The other window took before the victim when it is
					// taken earlier: in order among windows of one kind,
					// and always when it is the refundable one.
					kept := kinds[other].keeps && kinds[victim].keeps && other < victim
					// The Decision names the window that sets RetryAfter:
					// the victim, unless a kept take makes the other one
					// wait as long (then the first of them in order).
					if want := fmt.Sprint("w", victim); !kept && d.Policy != want {
						t.Errorf("denied by %q; want %q, whose take denied", d.Policy, want)
					}
					switch {
					case after > before:
						t.Errorf("window %d has %v tokens after the denial, had %v: more than before", other, after, before)
					case !kept && after != before:
						t.Errorf("window %d has %v tokens after the denial, had %v: its take stayed", other, after, before)
					case kept && after < before-1:
						t.Errorf("window %d has %v tokens after the denial, had %v: more than its one token is gone", other, after, before)
					}
					if got, want := ws[other].AllowN(now, "k", 1), after >= 1; got != want {
						t.Errorf("a direct request to window %d with %v tokens: admitted %v", other, after, got)
					}
				})
			}
		}
	}
}
