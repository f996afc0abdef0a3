package limit_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit66MaxDebtNeedSweep: MaxDebtError.Need "is the MaxDebt
// (WithMaxDebt, in tokens of New's limit) the policy needs: a limiter
// built as this one but WithMaxDebt(Need) takes it ... unless New refuses
// that MaxDebt" (tier.go). A random sweep over rates that are and are not
// short fractions, on Auto, Buckets and CountMin, tiers and SetLimit.
func TestAudit66MaxDebtNeedSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 1))
	rates := []limit.Limit{10, 1.0 / 3, 0.3, 7000.0 / 13, limit.Every(7 * time.Millisecond), math.Pi, 1000, 5e-4, 1.0 / 7, 123.456, limit.Every(3 * time.Second)}
	engines := []limit.Engine{limit.Auto, limit.Buckets, limit.CountMin}
	tried, refused := 0, 0
	n := testsize.Sample(3000, 1000, 300)
	for i := 0; i < n; i++ {
		R := rates[rng.IntN(len(rates))]
		B := 1 + rng.IntN(50)
		eng := engines[rng.IntN(len(engines))]
		opts := []limit.Option{limit.WithEngine(eng), limit.WithCapacity(10, 0.5), limit.WithSeed(1)}
		if rng.IntN(2) == 0 {
			opts = append(opts, limit.WithMaxDebt(float64(B+rng.IntN(3*B))))
		}
		l, err := limit.New(R, B, opts...)
		if err != nil {
			continue
		}
		var r limit.Limit
		switch rng.IntN(3) {
		case 0:
			r = R / limit.Limit(1+rng.IntN(9))
		case 1:
			r = R * limit.Limit(rng.Float64()+0.05)
		default:
			r = rates[rng.IntN(len(rates))]
		}
		b := 1 + rng.IntN(3*B)
		setLimit := rng.IntN(3) == 0
		if setLimit {
			b = B
			err = l.SetLimit(r)
		} else {
			_, err = l.Tier("t", r, b)
		}
		var me *limit.MaxDebtError
		if !errors.As(err, &me) {
			continue
		}
		tried++
		opts2 := append(append([]limit.Option(nil), opts...), limit.WithMaxDebt(me.Need))
		l2, err2 := limit.New(R, B, opts2...)
		if err2 != nil {
			refused++
			if me.Need <= 1<<24 && eng != limit.Buckets && refused < 5 {
				t.Logf("New(%v, %d, %v, WithMaxDebt(%v)) refused: %v", float64(R), B, eng, me.Need, err2)
			}
			continue // "unless New refuses that MaxDebt"
		}
		if setLimit {
			err = l2.SetLimit(r)
		} else {
			_, err = l2.Tier("t", r, b)
		}
		if err != nil {
			t.Errorf("New(%v, %d, %v) refuses policy (%v, %d) with Need %v; WithMaxDebt(Need) still refuses it: %v", float64(R), B, eng, float64(r), b, me.Need, err)
		}
	}
	if tried < n/15 {
		t.Fatalf("only %d MaxDebtErrors in %d policies", tried, n)
	}
	t.Logf("%d MaxDebtErrors checked, %d Needs refused by New", tried, refused)
}
