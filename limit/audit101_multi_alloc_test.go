package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit101MultiFourWindowsNoAlloc: Multi's doc: "A decision of a
// Multi of at most four windows does not allocate when every count-min
// window keeps at most two generations". Four windows mixing every kind
// the decision path branches on: a limiter given twice (the shared
// precheck), an Inf window, a Buckets window with MaxDebt = burst (it
// takes last: the second pass of takeOrder), a conservative count-min
// with a RejectCost; decisions admitted, denied by the precheck (with
// the RejectCost charged; the Inf window takes first, every other one
// takes last, so every denial is the precheck's), above
// a burst (Never), with one key and with four.
func TestAudit101MultiFourWindowsNoAlloc(t *testing.T) {
	if testsize.Race {
		t.Skip("the race detector allocates")
	}
	clk := limittest.NewFakeClock()
	clk.Set(1 << 31)
	a := limit.MustNew(1000, 1000, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(true),
		limit.WithRejectCost(1))
	b := limit.MustNew(1000, 500, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithMaxDebt(500))
	inf := limit.MustNew(limit.Inf, 1, limit.WithClock(clk))
	m, err := limit.NewMulti(a, b, a, inf)
	if err != nil {
		t.Fatal(err)
	}
	b.AllowN(clk.Now(), "fullb", 500)
	a.AllowN(clk.Now(), "fulla", 1000)
	i := 0
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"admitted", func() { clk.Advance(1e6); m.DecideKeys(clk.Now(), 1, keys[i%8]); i++ }},
		{"admitted four keys", func() {
			clk.Advance(1e6)
			m.DecideKeys(clk.Now(), 1, keys[i%8], keys[(i+1)%8], keys[(i+2)%8], "x")
			i++
		}},
		{"precheck denial by the Buckets window", func() { m.DecideKeys(clk.Now(), 1, "fullb") }},
		{"precheck denial by the conservative window (RejectCost)", func() { m.DecideKeys(clk.Now(), 1, "fulla") }},
		{"never", func() { m.DecideKeys(clk.Now(), 501, "k") }},
		{"Allow", func() { m.Allow(keys[i%8]); i++ }},
	} {
		if got := testing.AllocsPerRun(100, tc.f); got != 0 {
			t.Errorf("%s: %v allocations per decision", tc.name, got)
		}
	}
}
