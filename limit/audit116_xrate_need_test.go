package limit_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit116MaxDebtNeedTakes sweeps Tier, SetLimit and SetBurst
// refusals: MaxDebtError's doc, "Need is the MaxDebt ... the policy
// needs: a limiter built as this one but WithMaxDebt(Need) takes it
// ..., unless New refuses that MaxDebt".
func TestAudit116MaxDebtNeedTakes(t *testing.T) {
	rates := []limit.Limit{10, 1e6, 1e5, 999, 0.37, 1000, limit.Every(7 * time.Millisecond), limit.Every(3 * time.Second), 1e-3, 12.5, 7.3, 18387}
	rng := rand.New(rand.NewPCG(116, 1))
	hits := 0
	defer func() { t.Logf("checked %d refusals", hits) }()
	for range testsize.Sample(600, 200, 60) {
		R := rates[rng.IntN(len(rates))]
		b0 := 1 + rng.IntN(30)
		var opts []limit.Option
		switch rng.IntN(4) {
		case 1:
			opts = append(opts, limit.WithEngine(limit.CountMin))
		case 2:
			opts = append(opts, limit.WithEngine(limit.Buckets))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, limit.WithRejectCost([]float64{0.5, 1, 0.25, 3}[rng.IntN(4)]))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, limit.WithMaxDebt(float64(b0)*[]float64{1, 1.5, 2, 3}[rng.IntN(4)]))
		}
		base := append([]limit.Option{limit.WithCapacity(16, 0.01), limit.WithClock(limittest.NewFakeClock())}, opts...)
		l, err := limit.New(R, b0, base...)
		if err != nil {
			continue
		}
		r := limit.Limit(float64(R) * []float64{0.5, 0.25, 0.1, 1.0 / 3, 0.7, 1, 2}[rng.IntN(7)])
		b := 1 + rng.IntN(4*b0)
		var what string
		var e error
		switch rng.IntN(3) {
		case 0:
			what = "Tier"
			_, e = l.Tier("t", r, b)
		case 1:
			what = "SetLimit"
			e = l.SetLimit(r)
			b = b0
		default:
			what = "SetBurst"
			e = l.SetBurst(b)
			r = R
		}
		var me *limit.MaxDebtError
		if !errors.As(e, &me) {
			continue
		}
		l2, err := limit.New(R, b0, append(base, limit.WithMaxDebt(me.Need))...)
		if err != nil {
			continue // New refuses that MaxDebt: documented
		}
		var e2 error
		switch what {
		case "Tier":
			_, e2 = l2.Tier("t", r, b)
		case "SetLimit":
			e2 = l2.SetLimit(r)
		default:
			e2 = l2.SetBurst(b)
		}
		hits++
		if e2 != nil {
			t.Fatalf("New(%v, %d, %d opts) %s(%v, %d): Need %v; rebuilt WithMaxDebt(Need) on %v (engine was %v): %v",
				float64(R), b0, len(opts), what, float64(r), b, me.Need, l2.Engine(), l.Engine(), e2)
		}
	}
}
