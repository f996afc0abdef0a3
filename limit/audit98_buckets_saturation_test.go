package limit_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a98bkFlooded returns limit.New(10, 20) on Buckets, sized for 2,000 keys
// at 1%, after 2,600 keys took their burst at one instant (past its
// cliff), and its clock.
func a98bkFlooded(t *testing.T, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1), limit.WithCapacity(2000, 0.01), limit.WithEngine(limit.Buckets)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	now := l.Now()
	for i := range 2600 {
		l.AllowN(now, fmt.Sprintf("heavy-%d", i), 20)
	}
	return l, clk
}

// a98bkFresh returns the share of probes fresh keys denied one token of
// the limiter's current policy now (PeekN: nothing written).
func a98bkFresh(l *limit.Limiter, probes int) float64 {
	d := 0
	for i := range probes {
		if !l.Peek(fmt.Sprintf("fresh-%d", i)).Allowed {
			d++
		}
	}
	return float64(d) / float64(probes)
}

// TestAudit98BucketsSaturationStableAndReproducible: on a Buckets limiter
// with a fixed seed, flooded past its capacity and left unchanged (a
// frozen clock, no write), Stats().Saturation is the same reading call
// after call within a millionth (the floors come from the histogram, only
// the fingerprint term is sampled, from a stream drawn per engine), two
// limiters built and flooded alike read the same sequence, and the
// reading is within docs/capacity.md's accuracy of the measured share of
// fresh keys denied ("within 2% relative on every row where the
// measurement has 1,000 denials or more"; 20,000 probes here, 5%
// allowed). The Buckets engine's sample stream is per engine (unlike the
// count-min's, process-wide: see the report of audit 98); nothing in
// limit/stats.go promises either, so this pins the behaviour the brief
// asked about: a fixed-seed Buckets reading depends only on the number of
// Saturation reads the same limiter made before, and barely.
func TestAudit98BucketsSaturationStableAndReproducible(t *testing.T) {
	a, _ := a98bkFlooded(t)
	b, _ := a98bkFlooded(t)
	var ra, rb [6]float64
	for i := range ra {
		ra[i] = a.Stats().Saturation
	}
	for i := range rb {
		rb[i] = b.Stats().Saturation
	}
	if ra != rb {
		t.Errorf("two limiters built and flooded alike read %v and %v", ra, rb)
	}
	for _, s := range ra[1:] {
		if math.Abs(s-ra[0]) > 1e-6 {
			t.Errorf("readings of an unchanged table: %v; want all within 1e-6", ra)
			break
		}
	}
	m := a98bkFresh(a, 20000)
	if m < 0.3 || math.Abs(ra[0]-m) > 0.05*m {
		t.Errorf("fresh keys denied %.4f, Saturation %.4f; want a full table read within 5%%", m, ra[0])
	}
}

// TestAudit98BucketsSaturationFollowsPolicy: Stats().Saturation is the
// rate at which fresh keys asking one token of the limiter's current
// policy are denied (limit/stats.go: "asking for one token now"), so on
// a table flooded at 20 tokens of debt it follows SetBurst and SetLimit:
// a burst of 21 or more, or a slower rate whose burst holds the floors,
// reads 0 and denies none; a burst of 5 or 19, or a faster rate, reads
// the full table's rate, still 50 ms later (19.5 tokens of debt left),
// and 0 at 110 ms (18.9: room for a token). Each reading within 5% of
// 20,000 probes' (or both about 0).
func TestAudit98BucketsSaturationFollowsPolicy(t *testing.T) {
	l, clk := a98bkFlooded(t, limit.WithMaxDebt(80))
	for _, c := range []struct {
		name string
		set  func() error
		full bool
	}{
		{"as built", func() error { return nil }, true},
		{"SetBurst(5)", func() error { return l.SetBurst(5) }, true},
		{"SetBurst(19)", func() error { return l.SetBurst(19) }, true},
		{"SetBurst(21)", func() error { return l.SetBurst(21) }, false},
		{"SetBurst(20), SetLimit(5)", func() error { _ = l.SetBurst(20); return l.SetLimit(5) }, false},
		{"SetLimit(20)", func() error { return l.SetLimit(20) }, true},
		{"SetLimit(10), 50 ms later", func() error { clk.Advance(50 * time.Millisecond); return l.SetLimit(10) }, true},
		{"110 ms later", func() error { clk.Advance(60 * time.Millisecond); return nil }, false},
	} {
		if err := c.set(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s, m := l.Stats().Saturation, a98bkFresh(l, 20000)
		switch {
		case c.full && (m < 0.3 || math.Abs(s-m) > 0.05*m):
			t.Errorf("%s (limit %v, burst %d): fresh keys denied %.4f, Saturation %.4f; want a full table read within 5%%", c.name, l.Limit(), l.Burst(), m, s)
		case !c.full && (m != 0 || s > 1e-3):
			t.Errorf("%s (limit %v, burst %d): fresh keys denied %.4f, Saturation %.4f; want both about 0", c.name, l.Limit(), l.Burst(), m, s)
		}
	}
}
