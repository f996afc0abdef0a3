package law_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/law"
)

// TestUndecay: the value Undecay returns decays back to b or more over
// dt, through the law itself and through its compiled form (the tables a
// sketch reads by), and it is the least such value up to a few ulps; a
// custom law has no inverse.
func TestUndecay(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 49))
	laws := []law.Decay{law.None(), law.Exponential(0.01), law.Exponential(1), law.Exponential(3000), law.Linear(1), law.Linear(1e6), law.Linear(0.003)}
	for _, d := range laws {
		c := law.Compile(d)
		for range 20000 {
			b := math.Ldexp(1+r.Float64(), r.IntN(80)-40)
			dt := int64(1 + r.IntN(1<<r.IntN(31)))
			v, ok := law.Undecay(d, b, dt)
			if !ok {
				t.Fatalf("%T: Undecay refused a provided law", d)
			}
			if math.IsInf(v, 1) {
				continue // the clamp at Hi takes it
			}
			for name, got := range map[string]float64{"law": d.Apply(v, dt), "compiled": c.Apply(v, dt)} {
				if got < b {
					t.Fatalf("%T(%v): Undecay(%v, %d ms) = %v decays (%s) to %v < %v", d, c.Param(), b, dt, v, name, got, b)
				}
			}
			// The least: a value a little lower no longer reaches b + a
			// few ulps (the bias is 2^-40 relative for Exponential).
			if lower := v * (1 - 0x1p-38); d.Apply(lower, dt) > b*(1+0x1p-36) && c.Kind() != law.KindNone {
				t.Fatalf("%T(%v): Undecay(%v, %d ms) = %v is not the least: %v decays to %v", d, c.Param(), b, dt, v, lower, d.Apply(lower, dt))
			}
		}
	}
	if _, ok := law.Undecay(badLaw{1}, 1, 1); ok {
		t.Fatal("a custom law has no inverse, but Undecay reported one")
	}
}
