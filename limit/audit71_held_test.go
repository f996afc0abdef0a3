package limit

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a71T0 = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

// a71Capped returns a count-min limiter at rate R with burst = MaxDebt
// = md on a fake clock, and the key "k" driven to MaxDebt at a71T0.
func a71Capped(t *testing.T, R float64, md int) *Limiter {
	l, _ := a71CappedClk(t, R, md)
	return l
}

func a71CappedClk(t *testing.T, R float64, md int) (*Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.SetTime(a71T0)
	l, err := New(Limit(R), md, WithMaxDebt(float64(md)), WithEngine(CountMin), WithSize(2, 64), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if d := l.DecideN(a71T0, "k", md); !d.Allowed {
		t.Fatalf("full burst from an empty key denied: %+v", d)
	}
	return l, clk
}

// At the cap of a count-min limiter whose MaxDebt in units is not a
// float32 (doc.go "Exactness": held at the float32 above MaxDebt, late
// by up to that step's drain, never early), for the Limiter, a Tier and
// a Multi: the retry at t+RetryAfter is admitted, and the first admitted
// ms is at most step's drain + 1 ms before it.
func TestAudit71HeldAtCap(t *testing.T) {
	for _, c := range []struct {
		R  float64
		md int
	}{{0.944, 958687}, {0.944, 65537 * 3}, {7.3, 1<<24 - 1}, {1.0 / 3, 100003}} {
		probe := a71Capped(t, c.R, c.md)
		step := (probe.heldU - probe.maxDebtU) / probe.drain // ms
		name := fmt.Sprintf("R %v MaxDebt %d (exact %v, step drain %.3f ms)", c.R, c.md, probe.exact, step)
		// The Limiter and a Tier of R/2.
		for _, which := range []string{"limiter", "tier"} {
			l, clk := a71CappedClk(t, c.R, c.md)
			decide := l.DecideN
			peekN := l.PeekN
			if which == "tier" {
				tr, err := l.Tier("half", Limit(c.R/2), c.md/2)
				if err != nil {
					t.Fatal(err)
				}
				decide, peekN = tr.DecideN, tr.PeekN
			}
			peek := func(at time.Time, key string, n int) Decision {
				clk.SetTime(at)
				return peekN(at, key, n)
			}
			d := decide(a71T0, "k", 1)
			if d.Allowed {
				t.Fatalf("%s %s: at the cap admitted", name, which)
			}
			ra := d.RetryAfter
			// Scan forward (the fake clock cannot go back): from step's
			// drain + 2 ms before RetryAfter, which must still deny, to the
			// first admitted ms, which must be at most RetryAfter.
			from := ra - time.Duration((step+2)*float64(time.Millisecond))/time.Millisecond*time.Millisecond
			if from > 0 && peek(a71T0.Add(from), "k", 1).Allowed {
				t.Errorf("%s %s: RetryAfter %v but admitted already at %v: late by more than the float32 step's drain (%.3f ms, doc.go Exactness)", name, which, ra, from, step)
				continue
			}
			first := max(from, 0)
			for !peek(a71T0.Add(first), "k", 1).Allowed {
				first += time.Millisecond
				if first > ra+time.Second {
					break
				}
			}
			if first > ra {
				t.Errorf("%s %s: RetryAfter %v, first admitted at %v: the retry at RetryAfter denied (early), doc: never early", name, which, ra, first)
			}
		}
		// A Multi of the capped window and a roomy second window.
		var mclk *sketchtest.FakeClock
		mk := func() *Multi {
			l, clk := a71CappedClk(t, c.R, c.md)
			mclk = clk
			w2, err := New(1000, 1000, WithEngine(CountMin), WithSize(2, 64), WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMulti(l, w2)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		d := mk().DecideKeys(a71T0, 1, "k")
		if d.Allowed {
			t.Fatalf("%s multi: at the cap admitted", name)
		}
		m := mk()
		mclk.SetTime(a71T0.Add(d.RetryAfter))
		if !m.DecideKeys(a71T0.Add(d.RetryAfter), 1, "k").Allowed {
			t.Errorf("%s multi: RetryAfter %v: the retry at it denied (early)", name, d.RetryAfter)
		}
	}
}

// Reserve at the cap is refused (not OK, Delay InfDuration) and Cancel of
// it does nothing; a reservation that fills the key to the cap and its
// Cancel leave the key as it was.
func TestAudit71HeldReserveCancel(t *testing.T) {
	l := a71Capped(t, 0.944, 958687)
	r := l.ReserveN(a71T0, "k", 1)
	if r.OK() || r.DelayFrom(a71T0) != InfDuration {
		t.Errorf("ReserveN at the cap: OK %v Delay %v, want refused", r.OK(), r.DelayFrom(a71T0))
	}
	r.Cancel()
	before := l.TokensAt(a71T0, "k")
	l2, clk2 := a71CappedClk(t, 0.944, 958687)
	t1 := a71T0.Add(10 * time.Second)
	clk2.SetTime(t1)
	tok := l2.TokensAt(t1, "k")
	r2 := l2.ReserveN(t1, "k", 1)
	if !r2.OK() {
		t.Fatalf("ReserveN of 1 token with %v tokens: not OK", tok)
	}
	r2.Cancel()
	// one float32 ulp of the cell (64 units at ~1e9) in tokens of ~1060 units
	if got := l2.TokensAt(t1, "k"); got < tok-64/l2.unit {
		t.Errorf("Reserve then Cancel at the cap's edge: tokens %v -> %v, want back to at least %v", tok, got, tok)
	}
	_ = before
}
