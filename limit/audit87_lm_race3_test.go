package limit_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit87LmHookClock runs its armed function once, at the (skip+1)th
// NowMillis after arming, then reads the fake clock: a pause point inside
// a Multi's call, for a deterministic interleaving on one goroutine.
type audit87LmHookClock struct {
	*sketchtest.FakeClock
	skip atomic.Int32
	hook atomic.Pointer[func()]
}

func (c *audit87LmHookClock) NowMillis() int64 {
	if c.hook.Load() != nil && c.skip.Add(-1) < 0 {
		if f := c.hook.Swap(nil); f != nil {
			(*f)()
		}
	}
	return c.FakeClock.NowMillis()
}

func (c *audit87LmHookClock) arm(skip int32, f func()) {
	c.skip.Store(skip)
	c.hook.Store(&f)
}

func (c *audit87LmHookClock) fired() bool { return c.hook.Load() == nil }

// audit87LmKind is one kind of window: how it is built (rate 1/s, burst
// 2), and whether a take that empties it may not come back.
type audit87LmKind struct {
	name  string
	opts  []limit.Option
	keeps bool
}

var audit87LmKinds = []audit87LmKind{
	{"B", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(16, 0.01)}, false},
	{"C", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 256)}, false},
	{"Bmd", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(16, 0.01), limit.WithMaxDebt(2)}, true},
	{"Cmd", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 256), limit.WithMaxDebt(2)}, true},
	{"Ccu", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 256), limit.WithConservativeUpdate(true)}, true},
}

// audit87LmTakeOrder is the take order Multi's doc states: the windows
// whose take comes back, in order, then the others, in order.
func audit87LmTakeOrder(kinds []audit87LmKind) []int {
	var order []int
	for _, keeps := range []bool{false, true} {
		for i, k := range kinds {
			if k.keeps == keeps {
				order = append(order, i)
			}
		}
	}
	return order
}

// audit87LmFirstTaker is the window that takes first (takeOrder's
// order[0]), the one Multi's precheck does not read: the first, in
// index order, whose take comes back, or window 0 if there is none.
func audit87LmFirstTaker(kinds []audit87LmKind) int {
	return audit87LmTakeOrder(kinds)[0]
}

// audit87LmRace3 builds windows of the given kinds (and an Inf window
// before kinds[inf], or last if inf is len(kinds)), each key
// owing 1 of 2, arms the victim's clock so that another caller fills
// the victim between the precheck and its take, and runs the Multi's
// decision at a future t (every operation reads the clock). It returns
// the windows, the Decision and the (unmoved) fake clock.
func audit87LmRace3(t *testing.T, kinds []audit87LmKind, victim, inf int, rc float64) ([]*limit.Limiter, limit.Decision, *sketchtest.FakeClock) {
	t.Helper()
	fc := sketchtest.NewFakeClock()
	fc.Set(1 << 30)
	now := fc.Now()
	var ws, all []*limit.Limiter
	var clocks []*audit87LmHookClock
	for i, k := range kinds {
		if i == inf {
			all = append(all, limit.MustNew(limit.Inf, 1, limit.WithName("inf")))
		}
		c := &audit87LmHookClock{FakeClock: fc}
		opts := append([]limit.Option{limit.WithSeed(uint64(i + 1)), limit.WithClock(c), limit.WithName(fmt.Sprint("w", i)), limit.WithRejectCost(rc)}, k.opts...)
		w := limit.MustNew(1, 2, opts...)
		if !w.AllowN(now, "k", 1) {
			t.Fatalf("setup: window %d denied its first token", i)
		}
		ws, all, clocks = append(ws, w), append(all, w), append(clocks, c)
	}
	if inf == len(kinds) {
		all = append(all, limit.MustNew(limit.Inf, 1, limit.WithName("inf")))
	}
	m, err := limit.NewMulti(all...)
	if err != nil {
		t.Fatal(err)
	}
	// The hook must run between the precheck and the victim's take: by
	// then the windows before the victim in the take order have taken
	// (each is empty) and the ones after it have not (each has its token).
	order := audit87LmTakeOrder(kinds)
	fill := func() {
		before := true
		for _, i := range order {
			if i == victim {
				before = false
				continue
			}
			want := 1.0
			if before {
				want = 0
			}
			if got := ws[i].TokensAt(now, "k"); got != want {
				t.Errorf("setup: at the victim's take, window %d (take order %v, victim %d) has %v tokens; want %v", i, order, victim, got, want)
			}
		}
		if got := ws[victim].TokensAt(now, "k"); got != 1 {
			t.Errorf("setup: at the victim's take, the victim has %v tokens; want 1 (the precheck passed it)", got)
		}
		if !ws[victim].AllowN(now, "k", 1) {
			t.Error("setup: the other caller was denied the victim's last token")
		}
	}
	// The precheck reads every window but the one that takes first
	// (takeOrder's order[0]: the first window, in the Multi's index
	// order, whose take comes back, an Inf window, which keeps nothing,
	// counting as one; window 0 if every window is of the keeps kind).
	// So the victim's take is its
	// first clock read in the call when it is that window, else its
	// second (the precheck's read comes first).
	var allKinds []audit87LmKind
	victimAt := -1
	for i, k := range kinds {
		if i == inf {
			allKinds = append(allKinds, audit87LmKind{name: "inf"})
		}
		if i == victim {
			victimAt = len(allKinds)
		}
		allKinds = append(allKinds, k)
	}
	if inf == len(kinds) {
		allKinds = append(allKinds, audit87LmKind{name: "inf"})
	}
	skip := int32(1)
	if audit87LmFirstTaker(allKinds) == victimAt {
		skip = 0
	}
	clocks[victim].arm(skip, fill)
	d := m.DecideKeys(now.Add(time.Hour), 1, "k")
	if !clocks[victim].fired() {
		t.Fatal("setup: the victim's take never read its clock")
	}
	return ws, d, fc
}

// TestAudit87LmRaceThreeWindowsTakeOrder: every triple of window kinds
// (Buckets and count-min, each refundable, with MaxDebt = burst, and a
// conservative count-min), every window as the victim of the race
// Multi's doc leaves (another caller fills it between the precheck and
// its take), with and without an Inf window among them. Every key owes
// 1 of 2, so each take empties its window. Multi's doc: the windows take
// "in order, except that those whose take may not come back ... take
// after the others"; the victim "denies (and charges its RejectCost)
// after the windows before it in that order took"; a take among them
// that comes back comes back exactly (nothing else touched its key), one
// that cannot stays, "on the safe side ... never admitted more". So:
// the windows after the victim in the take order still hold their token;
// the refundable windows before it hold it again; the unrefundable ones
// before it hold it or not, never more; the victim holds none; the
// Decision is a denial by the victim, or by a window that kept its take
// (whose RetryAfter is as long), whichever comes first in the windows'
// order (the Inf window never names it); RetryAfter is 1 s, and a retry
// then is admitted by the windows that hold their token back by then.
func TestAudit87LmRaceThreeWindowsTakeOrder(t *testing.T) {
	point := 0 // under an emulator, every fourth point of the grid
	for _, a := range audit87LmKinds {
		for _, b := range audit87LmKinds {
			for _, c := range audit87LmKinds {
				kinds := []audit87LmKind{a, b, c}
				for victim := range 3 {
					for _, inf := range []int{-1, 0, 2} {
						if point++; !testsize.Keep(point, testsize.Sample(1, 1, 8)) {
							continue
						}
						name := fmt.Sprintf("%s+%s+%s/victim=%d/inf=%d", a.name, b.name, c.name, victim, inf)
						t.Run(name, func(t *testing.T) {
							ws, d, fc := audit87LmRace3(t, kinds, victim, inf, 0)
							now := fc.Now()
							if d.Allowed {
								t.Fatalf("admitted past a full window: %+v", d)
							}
							order := audit87LmTakeOrder(kinds)
							before := map[int]bool{}
							for _, i := range order {
								if i == victim {
									break
								}
								before[i] = true
							}
							firstKept := -1
							for i, w := range ws {
								got := w.TokensAt(now, "k")
								switch {
								case i == victim:
									if got != 0 {
										t.Errorf("victim window %d has %v tokens; want 0", i, got)
									}
								case !before[i]:
									if got != 1 {
										t.Errorf("window %d, after the victim in the take order %v, has %v tokens; want 1 (it never took)", i, order, got)
									}
								case !kinds[i].keeps:
									if got != 1 {
										t.Errorf("window %d (refundable, before the victim in %v) has %v tokens; want 1 (its take back exactly)", i, order, got)
									}
								default:
									if got != 0 && got != 1 {
										t.Errorf("window %d (unrefundable, before the victim) has %v tokens; want 0 (kept) or 1", i, got)
									}
									if got == 0 && firstKept < 0 {
										firstKept = i
									}
								}
							}
							want := victim
							if firstKept >= 0 && firstKept < victim {
								want = firstKept
							}
							if p := fmt.Sprint("w", want); d.Policy != p {
								t.Errorf("Decision names %q; want %q (the victim %d, or the first window that kept its take, %d)", d.Policy, p, victim, firstKept)
							}
							if d.RetryAfter != time.Second || d.Never || d.Remaining != 0 {
								t.Errorf("Decision %+v; want RetryAfter 1s, Remaining 0", d)
							}
							// A retry 1 ms before RetryAfter is denied by the victim;
							// at RetryAfter every window has a token.
							fc.Advance(d.RetryAfter - time.Millisecond)
							if tok := ws[victim].TokensAt(fc.Now(), "k"); tok >= 1 {
								t.Errorf("the victim has %v tokens 1 ms before RetryAfter", tok)
							}
							fc.Advance(time.Millisecond)
							for i, w := range ws {
								if tok := w.TokensAt(fc.Now(), "k"); tok < 1 {
									t.Errorf("window %d has %v tokens at RetryAfter %v", i, tok, d.RetryAfter)
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestAudit87LmRaceThreeUnrefundableKeepTheirTakes: the race of
// TestAudit87LmRaceThreeWindowsTakeOrder with several windows of the
// kind whose take may not come back (they take last, in order), the
// victim one of them or a refundable window. Multi's doc (limit/multi.go):
// the victim "denies (and charges its RejectCost) after the windows
// before it in that order took, and a take among them that cannot come
// back stays, on the safe side: one that another caller's admission
// landed on, one that left a shared count-min cell at the clamp, and
// each of the kind that takes last, when the denying window is of that
// kind too ... never admitted more". So a window of that kind that took before the victim keeps its
// take, at most its own one token (it reads 0 or 1 of the 1 it had,
// never less, never more); a refundable window that took before it has
// its token back exactly; a window after the victim in the take order
// never took. (Audit 87 found the doc's earlier words, "the first of
// them", wrong for three such windows: the first two both kept their
// takes; the doc now says every one that took before the denying window
// keeps it.)
func TestAudit87LmRaceThreeUnrefundableKeepTheirTakes(t *testing.T) {
	refundable := audit87LmKinds[0] // B
	cm := audit87LmKinds[1]         // C
	for _, k := range audit87LmKinds {
		if !k.keeps {
			continue
		}
		layouts := []struct {
			kinds  []audit87LmKind
			victim int
		}{
			{[]audit87LmKind{k, k, k}, 2},
			{[]audit87LmKind{k, k, k}, 1},
			{[]audit87LmKind{refundable, k, k, k}, 3},
			{[]audit87LmKind{k, cm, k, k}, 3},
			{[]audit87LmKind{k, k, refundable}, 2},
		}
		for _, lay := range layouts {
			var names []string
			for _, kk := range lay.kinds {
				names = append(names, kk.name)
			}
			t.Run(fmt.Sprintf("%s/victim=%d", strings.Join(names, "+"), lay.victim), func(t *testing.T) {
				ws, d, fc := audit87LmRace3(t, lay.kinds, lay.victim, -1, 0)
				now := fc.Now()
				if d.Allowed {
					t.Fatalf("admitted past a full window: %+v", d)
				}
				order := audit87LmTakeOrder(lay.kinds)
				before := true
				for _, i := range order {
					got := ws[i].TokensAt(now, "k")
					switch {
					case i == lay.victim:
						before = false
						if got != 0 {
							t.Errorf("the victim, window %d, has %v tokens; want 0", i, got)
						}
					case !before:
						if got != 1 {
							t.Errorf("window %d, after the victim in the take order %v, has %v tokens; want 1 (it never took)", i, order, got)
						}
					case !lay.kinds[i].keeps:
						if got != 1 {
							t.Errorf("window %d (refundable, before the victim in %v) has %v tokens; want 1 (its take back exactly)", i, order, got)
						}
					default:
						if got < 0 || got > 1 {
							t.Errorf("window %d (%s, took before the victim in %v) has %v tokens, had 1; want 0 (its take kept) to 1: "+
								"a kept take is at most its own one token, and never more", i, lay.kinds[i].name, order, got)
						}
					}
				}
			})
		}
	}
}

// TestAudit87LmRaceRejectCostByVictim: the race of
// TestAudit87LmRaceThreeWindowsTakeOrder with RejectCost 1 on every
// window. Multi's doc: the window whose take denied "denies (and
// charges its RejectCost)"; each window's "RejectCost is charged only by
// the window that denies". So the victim owes its 2 and the RejectCost
// (at most its MaxDebt: 2 where MaxDebt is the burst, else 3); no other
// window owes more than its token and the take it kept; the Decision's
// RetryAfter is the longest wait: 2 s where the victim owes 3, else 1 s.
func TestAudit87LmRaceRejectCostByVictim(t *testing.T) {
	point := 0 // under an emulator, every third point of the grid
	for _, a := range audit87LmKinds {
		for _, b := range audit87LmKinds {
			for _, c := range audit87LmKinds {
				kinds := []audit87LmKind{a, b, c}
				for victim := range 3 {
					if point++; !testsize.Keep(point, testsize.Sample(1, 1, 6)) {
						continue
					}
					t.Run(fmt.Sprintf("%s+%s+%s/victim=%d", a.name, b.name, c.name, victim), func(t *testing.T) {
						ws, d, fc := audit87LmRace3(t, kinds, victim, -1, 1)
						now := fc.Now()
						if d.Allowed {
							t.Fatalf("admitted past a full window: %+v", d)
						}
						wantVictim := -1.0 // owes 3 of 2
						if kinds[victim].name == "Bmd" || kinds[victim].name == "Cmd" {
							wantVictim = 0 // MaxDebt 2
						}
						if got := ws[victim].TokensAt(now, "k"); got != wantVictim {
							t.Errorf("the victim has %v tokens; want %v (its RejectCost charged, within MaxDebt)", got, wantVictim)
						}
						for i, w := range ws {
							if i == victim {
								continue
							}
							if got := w.TokensAt(now, "k"); got != 0 && got != 1 {
								t.Errorf("window %d has %v tokens; want 1, or 0 for a kept take (no RejectCost: it did not deny)", i, got)
							}
						}
						wantRetry := time.Second
						if wantVictim < 0 {
							wantRetry = 2 * time.Second
						}
						if d.RetryAfter != wantRetry {
							t.Errorf("RetryAfter %v; want %v", d.RetryAfter, wantRetry)
						}
						if wantVictim < 0 && d.Policy != fmt.Sprint("w", victim) {
							t.Errorf("Decision names %q; want the victim w%d, the longest wait", d.Policy, victim)
						}
					})
				}
			}
		}
	}
}
