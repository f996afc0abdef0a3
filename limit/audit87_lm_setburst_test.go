package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var audit87LmEngines = []struct {
	name string
	opts []limit.Option
}{
	{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(16, 0.01)}},
	{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 256)}},
}

// TestAudit87LmSetBurstFlipsTakeOrder: a window of MaxDebt 4 changes
// kind between two Multi decisions: SetBurst(4) makes its burst its
// MaxDebt (a take that empties it never comes back: it takes last),
// SetBurst(3) makes it refundable again (it takes first, and comes back
// exactly). Either way the race Multi's doc leaves (the other window
// filled between the precheck and its take) leaves the window as it was:
// taken last, it never took; taken first, its take came back. Also
// SetLimit(1/2): its burst of 2 at half the rate costs 4 of New's tokens,
// MaxDebt.
func TestAudit87LmSetBurstFlipsTakeOrder(t *testing.T) {
	type step struct {
		name   string
		change func(w *limit.Limiter) error
		burst  int     // the policy's burst after the change
		owe    float64 // tokens k owes, so that one more empties it
		keeps  bool    // the burst costs MaxDebt: w's take may not come back
	}
	steps := []step{
		{"SetBurst(4)=MaxDebt", func(w *limit.Limiter) error { return w.SetBurst(4) }, 4, 3, true},
		{"SetBurst(3)", func(w *limit.Limiter) error { return w.SetBurst(3) }, 3, 2, false},
		{"SetBurst(4) again", func(w *limit.Limiter) error { return w.SetBurst(4) }, 4, 3, true},
		{"SetLimit(0.5) burst 2=MaxDebt", func(w *limit.Limiter) error {
			if err := w.SetBurst(2); err != nil {
				return err
			}
			return w.SetLimit(0.5)
		}, 2, 1, true},
		{"SetLimit(1) burst 2", func(w *limit.Limiter) error { return w.SetLimit(1) }, 2, 1, false},
	}
	for _, e := range audit87LmEngines {
		for victimFirst := range 2 {
			t.Run(fmt.Sprintf("%s/victimFirst=%d", e.name, victimFirst), func(t *testing.T) {
				fc := sketchtest.NewFakeClock()
				fc.Set(1 << 30)
				c := &audit87LmHookClock{FakeClock: fc}
				w := limit.MustNew(1, 2, append([]limit.Option{limit.WithSeed(1), limit.WithClock(fc), limit.WithName("w"), limit.WithMaxDebt(4)}, e.opts...)...)
				v := limit.MustNew(1, 1, append([]limit.Option{limit.WithSeed(2), limit.WithClock(c), limit.WithName("v")}, e.opts...)...)
				ws := []*limit.Limiter{w, v}
				if victimFirst == 1 {
					ws = []*limit.Limiter{v, w}
				}
				m, err := limit.NewMulti(ws...)
				if err != nil {
					t.Fatal(err)
				}
				for si, s := range steps {
					fc.Advance(time.Hour) // every key drains to zero
					now := fc.Now()
					if err := s.change(w); err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
					key := fmt.Sprint("k", si)
					if s.owe > 0 && !w.AllowN(now, key, int(s.owe)) {
						t.Fatalf("%s: setup denied", s.name)
					}
					before := w.TokensAt(now, key)
					if before != float64(s.burst)-s.owe {
						t.Fatalf("%s: k has %v tokens; want %v", s.name, before, float64(s.burst)-s.owe)
					}
					// The precheck reads every window but the one that takes
					// first: v (refundable) when w's take may not come back
					// or v is window 0, else w (window 0, refundable). v's
					// take is then its first clock read in the call, else
					// its second (after the precheck's).
					skip := int32(0)
					if victimFirst == 0 && !s.keeps {
						skip = 1
					}
					c.arm(skip, func() {
						// Between the precheck and v's take: w, when it takes
						// first, has taken (k's last token); else not yet.
						want := before
						if victimFirst == 0 && !s.keeps {
							want--
						}
						if got := w.TokensAt(now, key); got != want {
							t.Errorf("%s: at v's take w has %v tokens for k; want %v", s.name, got, want)
						}
						if !v.AllowN(now, key, 1) {
							t.Errorf("%s: the other caller was denied", s.name)
						}
					})
					d := m.DecideKeys(now.Add(time.Hour), 1, key)
					if !c.fired() {
						t.Fatalf("%s: the victim's take never read its clock", s.name)
					}
					if d.Allowed {
						t.Fatalf("%s: admitted past a full window: %+v", s.name, d)
					}
					if d.Policy != "v" {
						t.Errorf("%s: denied by %q; want v", s.name, d.Policy)
					}
					if got := w.TokensAt(now, key); got != before {
						t.Errorf("%s: w has %v tokens for k after the race denial, had %v", s.name, got, before)
					}
					if !w.AllowN(now, key, 1) {
						t.Errorf("%s: a direct request of k's last token in w is denied", s.name)
					}
				}
			})
		}
	}
}

// TestAudit87LmSetRacingDecisionSeesOnePolicy: SetBurst or SetLimit on
// the first window runs inside a Multi decision (at the second window's
// precheck read, after the decision pinned the policies and before the
// first window's take). SetLimit's doc: "Decisions racing SetLimit use
// the old policy or the new one, never a mix"; Multi's decision reads
// each window's policy once. k owes 1 of the first window's burst 2: the
// old policy admits it (and the Decision, set by the first window's
// Remaining 0, carries burst 2, limit 1); the new ones (burst 1; or
// rate 1/4, where k's debt of 1 of New's tokens is 1/4 of the new
// token, so burst 2 of them costs 8 > MaxDebt: refused) would not. The
// window's debt after is 2 of New's tokens: the old cost.
func TestAudit87LmSetRacingDecisionSeesOnePolicy(t *testing.T) {
	changes := []struct {
		name string
		f    func(w *limit.Limiter) error
	}{
		{"SetBurst(1)", func(w *limit.Limiter) error { return w.SetBurst(1) }},
		{"SetLimit(0.5)", func(w *limit.Limiter) error { return w.SetLimit(0.5) }},
	}
	for _, e := range audit87LmEngines {
		for _, keeps := range []bool{false, true} {
			for _, ch := range changes {
				t.Run(fmt.Sprintf("%s/maxdebt=burst:%v/%s", e.name, keeps, ch.name), func(t *testing.T) {
					fc := sketchtest.NewFakeClock()
					fc.Set(1 << 30)
					c := &audit87LmHookClock{FakeClock: fc}
					md := 4.0
					if keeps {
						md = 2
					}
					w := limit.MustNew(1, 2, append([]limit.Option{limit.WithSeed(1), limit.WithClock(fc), limit.WithName("w"), limit.WithMaxDebt(md)}, e.opts...)...)
					o := limit.MustNew(1, 5, append([]limit.Option{limit.WithSeed(2), limit.WithClock(c), limit.WithName("o")}, e.opts...)...)
					m, err := limit.NewMulti(w, o)
					if err != nil {
						t.Fatal(err)
					}
					now := fc.Now()
					if !w.AllowN(now, "k", 1) {
						t.Fatal("setup")
					}
					var setErr error
					c.arm(0, func() { setErr = ch.f(w) })
					d := m.DecideKeys(now.Add(time.Hour), 1, "k") // a future t: every operation reads the clock
					if !c.fired() {
						t.Fatal("setup: the hook never ran")
					}
					if setErr != nil {
						if keeps && ch.name == "SetLimit(0.5)" {
							// burst 2 at 1/2 costs 4 > MaxDebt 2: refused, nothing changes
						} else {
							t.Fatalf("%s: %v", ch.name, setErr)
						}
					}
					if !d.Allowed {
						t.Fatalf("the decision pinned the old policy (k has 1 of 2) but was denied: %+v", d)
					}
					if d.Policy != "w" || d.Burst != 2 || d.Limit != 1 || d.Remaining != 0 {
						t.Errorf("Decision %+v; want the old policy's: w, burst 2, limit 1, Remaining 0", d)
					}
					if got := o.TokensAt(now, "k"); got != 4 {
						t.Errorf("o has %v tokens; want 4", got)
					}
					// The debt the old policy took: 2 of New's tokens. Read under
					// whatever policy w has now, in its tokens.
					want := float64(w.Burst()) - 2*float64(w.Limit())
					if got := w.TokensAt(now, "k"); got != want {
						t.Errorf("w (now burst %d, limit %v) has %v tokens; want %v (a debt of 2 of New's tokens)", w.Burst(), w.Limit(), got, want)
					}
				})
			}
		}
	}
}

// TestAudit87LmReserveCancelAcrossSetLimit: a reservation taken under
// one policy and cancelled after SetLimit/SetBurst gives back what it
// took (Cancel: "the key reads as if the reservation had never been
// taken"), read under the new policy: a key that owed only the
// reservation reads its full new burst. And a reservation of a Tier
// cancelled after SetLimit of its limiter.
func TestAudit87LmReserveCancelAcrossSetLimit(t *testing.T) {
	for _, e := range audit87LmEngines {
		t.Run(e.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1 << 30)
			w := limit.MustNew(2, 4, append([]limit.Option{limit.WithSeed(3), limit.WithClock(fc), limit.WithMaxDebt(16)}, e.opts...)...)
			now := fc.Now()
			// k owes 1; a reservation of 3 on top.
			if !w.AllowN(now, "k", 1) {
				t.Fatal("setup")
			}
			r := w.ReserveN(now, "k", 3)
			if !r.OK() {
				t.Fatal("setup: reservation refused")
			}
			if err := w.SetLimit(1); err != nil {
				t.Fatal(err)
			}
			if err := w.SetBurst(6); err != nil {
				t.Fatal(err)
			}
			r.Cancel()
			// k owes 1 token of rate 2, 1/2 s of drain: half a token of rate 1.
			if got := w.TokensAt(now, "k"); got != 5.5 {
				t.Errorf("k has %v tokens after Cancel under limit 1, burst 6; want 5.5", got)
			}
			tier, err := w.Tier("t", 4, 2)
			if err != nil {
				t.Fatal(err)
			}
			tr := tier.ReserveN(now, "j", 2)
			if !tr.OK() {
				t.Fatal("setup: tier reservation refused")
			}
			if err := w.SetLimit(8); err != nil {
				t.Fatal(err)
			}
			tr.Cancel()
			if got := tier.TokensAt(now, "j"); got != 2 {
				t.Errorf("j has %v tier tokens after Cancel; want 2", got)
			}
			if got := w.TokensAt(now, "j"); got != 6 {
				t.Errorf("j has %v tokens after Cancel; want 6", got)
			}
			// k owes 1/2 s of drain: 4 tokens at limit 8, so 2 of its
			// burst of 6 are left.
			if d := w.DecideN(now, "k", 2); !d.Allowed || d.Remaining != 0 || d.Burst != 6 || d.Limit != 8 {
				t.Errorf("DecideN(2) after the changes: %+v; want admitted, Remaining 0, burst 6, limit 8", d)
			}
		})
	}
}

// TestAudit87LmSetBurstAroundDebt: SetBurst below and above a key's
// debt (SetBurst's doc: "a key's debt is unchanged, so a lower burst
// leaves a key in debt further from admission, a higher one closer"),
// through a Multi whose other window is loose: the Multi's RetryAfter
// is the time the debt drains to the new burst less the request, to the
// millisecond (a retry then is admitted, 1 ms earlier is not), and
// Remaining after a raise is the new burst less the debt.
func TestAudit87LmSetBurstAroundDebt(t *testing.T) {
	for _, e := range audit87LmEngines {
		t.Run(e.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1 << 30)
			w := limit.MustNew(4, 8, append([]limit.Option{limit.WithSeed(5), limit.WithClock(fc), limit.WithName("w"), limit.WithMaxDebt(16)}, e.opts...)...)
			o := limit.MustNew(100, 50, append([]limit.Option{limit.WithSeed(6), limit.WithClock(fc), limit.WithName("o")}, e.opts...)...)
			m, err := limit.NewMulti(o, w)
			if err != nil {
				t.Fatal(err)
			}
			now := fc.Now()
			if !w.AllowN(now, "k", 6) {
				t.Fatal("setup")
			}
			if err := w.SetBurst(3); err != nil {
				t.Fatal(err)
			}
			// debt 6 of burst 3: 2 tokens need the debt at 1: 5 tokens at 4/s = 1250 ms.
			d := m.DecideKeys(now, 2, "k")
			if d.Allowed || d.RetryAfter != 1250*time.Millisecond || d.Policy != "w" || d.Burst != 3 {
				t.Fatalf("denied Decision %+v; want RetryAfter 1.25s by w (burst 3)", d)
			}
			fc.Advance(d.RetryAfter - time.Millisecond)
			if d2 := m.DecideKeys(fc.Now(), 2, "k"); d2.Allowed {
				t.Errorf("admitted 1 ms before RetryAfter: %+v", d2)
			}
			if err := w.SetBurst(12); err != nil {
				t.Fatal(err)
			}
			// debt now 6 - 4 x 1.249 = 1.004 of burst 12: admit 2; 8.996 left.
			d3 := m.DecideKeys(fc.Now(), 2, "k")
			if !d3.Allowed || d3.Remaining != 8 || d3.Policy != "w" || d3.Burst != 12 {
				t.Errorf("after SetBurst(12): %+v; want admitted, Remaining 8 (of 12), w", d3)
			}
			// NextAfter: a 9th token needs the debt at 3: from 3.004 at 4/s, 1 ms.
			if d3.NextAfter != time.Millisecond {
				t.Errorf("after SetBurst(12): NextAfter %v; want 1ms", d3.NextAfter)
			}
		})
	}
}

// TestAudit87LmInfWindowsSetBurst: Inf windows keep no state and admit
// every request; an all-Inf Multi's Decision is named by the window of
// the least burst (its Remaining), which SetBurst changes (Inf's SetBurst
// keeps the rate). Multi's doc: "An Inf window ... names the Decision
// only when every window is Inf"; Limit and Burst are those of the
// window that sets Remaining.
func TestAudit87LmInfWindowsSetBurst(t *testing.T) {
	a := limit.MustNew(limit.Inf, 5, limit.WithName("a"))
	b := limit.MustNew(limit.Inf, 3, limit.WithName("b"))
	m, err := limit.NewMulti(a, b)
	if err != nil {
		t.Fatal(err)
	}
	now := a.Now()
	if d := m.DecideKeys(now, 1, "k"); !d.Allowed || d.Remaining != 3 || d.Policy != "b" || d.Burst != 3 || d.Limit != limit.Inf {
		t.Errorf("all-Inf Multi: %+v; want admitted, Remaining 3 by b", d)
	}
	if err := a.SetBurst(2); err != nil {
		t.Fatal(err)
	}
	if d := m.DecideKeys(now, 1, "k"); !d.Allowed || d.Remaining != 2 || d.Policy != "a" || d.Burst != 2 {
		t.Errorf("after a.SetBurst(2): %+v; want admitted, Remaining 2 by a", d)
	}
	// With a finite window, the Inf windows never name the Decision.
	fc := sketchtest.NewFakeClock()
	fc.Set(1 << 30)
	f := limit.MustNew(1, 9, limit.WithName("f"), limit.WithClock(fc))
	m2, err := limit.NewMulti(a, f, b)
	if err != nil {
		t.Fatal(err)
	}
	if d := m2.DecideKeys(fc.Now(), 1, "k"); !d.Allowed || d.Remaining != 8 || d.Policy != "f" {
		t.Errorf("Inf+finite Multi: %+v; want admitted, Remaining 8 by f", d)
	}
}
