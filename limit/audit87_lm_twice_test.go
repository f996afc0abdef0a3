package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87LmFixedUnrefundableLimiterTwice: one limiter as two
// windows of a Multi (the same key twice, or a user key and a tenant key
// on one limiter: an earlier audit's TestAudit59MultiSameLimiterRefundsExactly
// has it on refundable limiters), a request of 2 against a burst of 2
// (each window alone fits it, the two together do not). Multi's doc
// (limit/multi.go): "A request is admitted only if every window admits
// it; a denial by any window gives back what the windows before it took
// (all of it, unless a concurrent request touched the same cells, or made
// a later window deny after a take that cannot come back: see below)".
// No concurrent request runs here. What was wrong: the precheck read each
// window with its own cost only, so the second window read room (nothing
// was taken yet), the first window's take filled the key, and the second
// window's take then denied; on a conservative count-min, or with
// MaxDebt = burst (the take fills the key to MaxDebt), that first take
// never comes back, so the denied request left the key owing 2 of its
// burst of 2. What fixed it: windows that are one *Limiter with one key
// take from one debt, and the precheck now reads each of them with the
// sum of their costs (4 > 2: it denies, and nothing is taken), besides
// reading every window but the one that takes first. The refundable
// controls gave it back before the fix too.
func TestAudit87LmFixedUnrefundableLimiterTwice(t *testing.T) {
	variants := []struct {
		name string
		opts []limit.Option
	}{
		{"count-min/conservative", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(true)}},
		{"count-min/maxdebt=burst", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(2)}},
		{"buckets/maxdebt=burst", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithMaxDebt(2)}},
		{"count-min/control", []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"buckets/control", []limit.Option{limit.WithEngine(limit.Buckets)}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1 << 30)
			l := limit.MustNew(1, 2, append([]limit.Option{limit.WithSeed(3), limit.WithClock(fc), limit.WithName("l")}, v.opts...)...)
			m, err := limit.NewMulti(l, l)
			if err != nil {
				t.Fatal(err)
			}
			now := fc.Now()
			d := m.DecideKeys(now, 2, "k")
			if d.Allowed {
				t.Fatalf("admitted 2 x 2 against a burst of 2: %+v", d)
			}
			if got := l.TokensAt(now, "k"); got != 2 {
				t.Errorf("after a denied Multi request (nothing else ran), k reads %v tokens; had 2 "+
					"(Multi: a denial \"gives back what the windows before it took (all of it, unless a concurrent request touched the same cells...)\")", got)
			}
			if !l.AllowN(now, "k", 2) {
				t.Errorf("a direct request of k's burst is denied after a denied Multi request: %s", fmt.Sprint(l.PeekN(now, "k", 2)))
			}
		})
	}
}
