package limit_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit107LimitChargesAfterRestore (audit 107; passes today: the
// Charges a policy made at New are used on an engine that ReadFrom has
// since rewritten, and no test drove Allow's Charge path across a
// restore). A limiter restored from another's snapshot, at the same
// instant, must decide every later Allow (Charges) as the original's
// AllowN (floats) does, before and after a SetLimit and a SetBurst and
// through a Tier made before the restore.
func TestAudit107LimitChargesAfterRestore(t *testing.T) {
	ca, cb := limittest.NewFakeClock(), limittest.NewFakeClock()
	ca.Set(1 << 30)
	cb.Set(1 << 30)
	mk := func(c *limittest.FakeClock, seed uint64) *limit.Limiter {
		return limit.MustNew(10, 3, limit.WithClock(c), limit.WithEngine(limit.Buckets), limit.WithCapacity(16, 0.01),
			limit.WithSeed(seed), limit.WithMaxDebt(60), limit.WithRejectCost(0.5))
	}
	a, b := mk(ca, 1), mk(cb, 2)
	tb, err := b.Tier("t", 2.5, 2) // made before the restore
	if err != nil {
		t.Fatal(err)
	}
	ta, err := a.Tier("t", 2.5, 2)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"k0", "k1", "k2", "k3"}
	for i := range 40 {
		a.Allow(keys[i%4])
		ta.AllowN(ca.Now(), keys[(i+1)%4], 1)
		ca.Advance(time.Duration(i%7) * 13 * time.Millisecond)
	}
	cb.Set(ca.NowMillis())
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		switch i {
		case 100:
			if a.SetLimit(4) != nil || b.SetLimit(4) != nil {
				t.Fatal("SetLimit(4)")
			}
		case 200:
			if a.SetBurst(5) != nil || b.SetBurst(5) != nil {
				t.Fatal("SetBurst(5)")
			}
		}
		k := keys[(i*7)%4]
		now := ca.Now()
		var got, want bool
		if i%3 == 0 {
			got, want = tb.Allow(k), ta.AllowN(now, k, 1)
		} else {
			got, want = b.Allow(k), a.AllowN(now, k, 1)
		}
		if got != want {
			t.Fatalf("step %d key %s: restored Allow %v, original AllowN %v", i, k, got, want)
		}
		if x, y := b.TokensAt(now, k), a.TokensAt(now, k); x != y {
			t.Fatalf("step %d key %s: restored TokensAt %v, original %v", i, k, x, y)
		}
		d := time.Duration(i%5) * 37 * time.Millisecond
		ca.Advance(d)
		cb.Advance(d)
	}
}
