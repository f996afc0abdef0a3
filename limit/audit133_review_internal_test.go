package limit

import (
	"math"
	"testing"
	"time"
)

// TestAudit133CostOfNewRateDefaultMaxDebt: TestCostOfNewRate
// (tier_internal_test.go) loops over debt in {0, 4 x burst, 2^20} and
// builds New(r, burst, WithMaxDebt(debt), ...), skipping any New that
// fails; since stop 64 WithMaxDebt(0) is refused, so its default-MaxDebt
// third (the limiters most users build) is silently skipped. This is
// that third, built without WithMaxDebt: costOf(New's rate) is New's
// unit and exactness, and newParams(New's rate and burst) New's params.
func TestAudit133CostOfNewRateDefaultMaxDebt(t *testing.T) {
	rates := []Limit{10, 3, 1000, 1e6, 1e-6, Limit(1) / 60, Every(3 * time.Second), Every(7 * time.Millisecond),
		Every(time.Hour / 1000), Limit(math.Pi), 7.3, 1234.5678, 0.37, 5e4 / 3}
	built := 0
	for _, r := range rates {
		for _, burst := range []int{1, 7, 100, 5000} {
			for _, e := range []Engine{Auto, CountMin} {
				l, err := New(r, burst, WithEngine(e))
				if err != nil {
					t.Fatalf("%v/%d %v: New with the default MaxDebt: %v", float64(r), burst, e, err)
				}
				built++
				if want := float64(2 * burst); l.MaxDebt() != want {
					t.Fatalf("%v/%d: default MaxDebt %v, want %v", float64(r), burst, l.MaxDebt(), want)
				}
				base := l.p.Load()
				unit, exact := l.costOf(float64(r))
				if unit != l.unit || exact != l.exact {
					t.Fatalf("%v/%d %v: costOf %v %v, New's %v %v", float64(r), burst, l.Engine(), unit, exact, l.unit, l.exact)
				}
				p, err := l.newParams(r, burst, l.name)
				if err != nil || *p != *base {
					t.Fatalf("%v/%d %v: newParams %+v (%v), New's %+v", float64(r), burst, l.Engine(), p, err, *base)
				}
			}
		}
	}
	if built != len(rates)*4*2 {
		t.Fatalf("built %d limiters", built)
	}
}
