package limit

import "testing"

// TestPoliciesCarryTheirCharges: every way a Buckets policy is made (New,
// SetLimit, SetBurst, Tier) converts its cost, burst and RejectCost to
// the engine's ticks (params.charged), since Allow decides with those
// Charges alone: a policy without them would admit or charge as a zero
// load.
func TestPoliciesCarryTheirCharges(t *testing.T) {
	check := func(what string, p *params) {
		t.Helper()
		if p.allowC.N() != p.unit || p.allowC.Limit() != p.burstU || p.rejectC.N() != p.rejectU {
			t.Errorf("%s: charges (%v against %v, reject %v), policy (%v against %v, reject %v)",
				what, p.allowC.N(), p.allowC.Limit(), p.rejectC.N(), p.unit, p.burstU, p.rejectU)
		}
	}
	l := MustNew(10, 20, WithMaxDebt(200), WithRejectCost(0.5))
	if l.Engine() != Buckets {
		t.Fatalf("runs on %v", l.Engine())
	}
	check("New", l.p.Load())
	if err := l.SetLimit(4); err != nil {
		t.Fatal(err)
	}
	check("SetLimit", l.p.Load())
	if err := l.SetBurst(7); err != nil {
		t.Fatal(err)
	}
	check("SetBurst", l.p.Load())
	tier, err := l.Tier("t", 2.5, 5)
	if err != nil {
		t.Fatal(err)
	}
	check("Tier", &tier.p)
	// And they decide: the tier's burst of 5, then denied.
	for i := range 5 {
		if !tier.Allow("k") {
			t.Fatalf("Tier.Allow %d denied", i)
		}
	}
	if tier.Allow("k") {
		t.Fatal("Tier.Allow admitted past its burst")
	}
}
