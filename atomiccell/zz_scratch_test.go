package atomiccell

import (
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

func TestScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, lam := range []float64{50, 37.3, 1, 0.5, 0.05} {
		d := decay.Exponential(lam)
		rr := NewRules(d, -1, 1)
		bad := 0
		for i := 0; i < 3_000_000; i++ {
			dt := int64((740 + rng.Float64()*20) * 1000 / lam)
			if dt >= 1<<24 {
				break
			}
			s := rng.Float64() * 1e6
			got, want := rr.Decay(s, dt), d.Apply(s, dt)
			if got == 0 && want > 0 || RoundUp(got) < RoundUp(want) {
				bad++
				if bad < 3 {
					t.Logf("lam=%v s=%v dt=%v got=%v want=%v", lam, s, dt, got, want)
				}
			}
		}
		t.Logf("lam=%v bad=%d", lam, bad)
	}
}
