package limit_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Any policy, exact or not, built by Tier or by SetLimit+SetBurst on a
// limiter of a random rate and MaxDebt (count-min or Auto): "its full
// burst is admitted at once from an empty key" and the rounding "is never
// early" (doc.go, "Exactness of a policy"): right after the full burst a
// one-token request is denied with a RetryAfter of at least one token's
// time, 1/r s (to the ms).
func TestAudit78AnyPolicyFullBurstThenDenied(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(3, 4))
	fails, tried := 0, 0
	rounds := testsize.Sample(1200, 1200, 300)
	for i := 0; i < rounds; i++ {
		R := limit.Limit(rng.Float64()*rng.Float64()*5000 + 1e-3)
		b := 1 + rng.IntN(300)
		md := float64(b) * (1 + rng.Float64()*8)
		clk := limittest.NewFakeClock()
		clk.Set(a78Start)
		l, err := limit.New(R, b, limit.WithClock(clk), limit.WithMaxDebt(md), limit.WithEngine([]limit.Engine{limit.CountMin, limit.Auto}[i%2]))
		if err != nil {
			continue
		}
		r := R * limit.Limit(0.1+rng.Float64()*4)
		b2 := 1 + rng.IntN(300)
		var mde *limit.MaxDebtError
		var ok bool
		if i%4 < 2 {
			tr, err := l.Tier("t", r, b2)
			if errors.As(err, &mde) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			ok = tr.AllowN(l.Now(), "fresh", b2)
			if ok {
				d := tr.DecideN(l.Now(), "fresh", 1)
				if d.Allowed || d.RetryAfter.Seconds() < 1/float64(r)-0.001 {
					t.Errorf("tier (%v,%d) after full burst: %+v", float64(r), b2, d)
				}
			}
		} else {
			if err := l.SetLimit(r); err != nil {
				continue
			}
			if err := l.SetBurst(b2); err != nil {
				continue
			}
			ok = l.AllowN(l.Now(), "fresh", b2)
			if ok {
				d := l.DecideN(l.Now(), "fresh", 1)
				if d.Allowed || d.RetryAfter.Seconds() < 1/float64(r)-0.001 {
					t.Errorf("SetLimit (%v,%d) after full burst: %+v", float64(r), b2, d)
				}
			}
		}
		tried++
		if !ok {
			if fails < 10 {
				t.Errorf("New(%v, %d, MaxDebt %v) on %v exact=%v: policy (%v, %d) denies its full burst from an empty key", float64(R), b, md, l.Engine(), l.Exact(), float64(r), b2)
			}
			fails++
		}
	}
	if tried < rounds*5/12 {
		t.Fatalf("only %d policies tried", tried)
	}
}
