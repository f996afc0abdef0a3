package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit37Diff drives a lock-free sketch and the float64 reference on one
// fake clock with the same operations (the reference receives a
// TryUpdate's delta only when the lock-free sketch admitted it, so both
// hold the same history), on heavily colliding keys, with clamps, the
// clock moving back and forward, long idles and At times out of order.
// With Min aggregation the lock-free estimate must never fall below the
// reference's (float32 rounded up, decay biased up, every step monotone).
type audit37Case struct {
	name    string
	law     decay.Decay
	lo, hi  float64
	neg     bool // negative deltas too
	maxIdle int64
}

func audit37Run(t *testing.T, c audit37Case, seed uint64, steps int) (worst float64, msg string) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 4, Decay: c.law, Lo: c.lo, Hi: c.hi, Clock: clk}
	s := mustNewSketch(t, cfg)
	r := mustNewReference(t, cfg)
	rng := rand.New(rand.NewPCG(seed, 37))
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	capHi := c.hi
	if math.IsInf(capHi, 1) {
		capHi = math.MaxFloat32
	}
	delta := func() float64 {
		var d float64
		switch rng.IntN(6) {
		case 0:
			d = 1
		case 1:
			d = rng.Float64() * 10
		case 2:
			d = math.Min(capHi, 1e30) * rng.Float64()
		case 3:
			d = 1e-9
		case 4:
			d = 0
		default:
			d = float64(rng.IntN(100))
		}
		if c.neg && rng.IntN(3) == 0 {
			d = -d
		}
		return d
	}
	for step := range steps {
		k := keys[rng.IntN(len(keys))]
		now := clk.NowMillis()
		var at time.Time
		switch rng.IntN(3) {
		case 0:
			at = time.UnixMilli(now - int64(rng.IntN(2000)))
		case 1:
			at = time.UnixMilli(now + int64(rng.IntN(2000)))
		default:
			at = time.UnixMilli(now)
		}
		op := rng.IntN(9)
		var what string
		switch op {
		case 0:
			d := delta()
			s.UpdateString(k, d)
			r.UpdateString(k, d)
			what = fmt.Sprintf("Update(%s, %v)", k, d)
		case 1:
			d := delta()
			s.UpdateAt(at, k, d)
			r.UpdateAt(at, k, d)
			what = fmt.Sprintf("UpdateAt(%v, %s, %v)", at.UnixMilli(), k, d)
		case 2:
			d := delta()
			s.UpdateAndQueryString(k, d)
			r.UpdateAndQueryString(k, d)
			what = fmt.Sprintf("UpdateAndQuery(%s, %v)", k, d)
		case 3, 4:
			d := delta()
			lim := r.QueryString(k) + d + float64(rng.IntN(3)-1)
			if rng.IntN(4) == 0 {
				lim = capHi * 2
			}
			if s.TryUpdateString(k, d, lim) {
				r.UpdateString(k, d)
			}
			what = fmt.Sprintf("TryUpdate(%s, %v, %v)", k, d, lim)
		case 5:
			d := delta()
			lim := r.QueryAt(at, k) + d + float64(rng.IntN(3)-1)
			if s.TryUpdateAt(at, k, d, lim) {
				r.UpdateAt(at, k, d)
			}
			what = fmt.Sprintf("TryUpdateAt(%v, %s, %v, %v)", at.UnixMilli(), k, d, lim)
		case 6:
			back := int64(rng.IntN(3000))
			clk.Set(now - back)
			what = fmt.Sprintf("clock back %d", back)
		case 7:
			adv := int64(rng.IntN(50))
			if rng.IntN(20) == 0 {
				adv = rng.Int64N(c.maxIdle + 1)
			}
			clk.Set(now + adv)
			what = fmt.Sprintf("clock +%d", adv)
		case 8:
			what = "query"
		}
		for _, q := range keys {
			lf, rf := s.QueryString(q), r.QueryString(q)
			rf = math.Min(rf, capHi)
			if math.IsNaN(lf) || math.IsInf(lf, 0) || lf > capHi {
				return 0, fmt.Sprintf("step %d after %s: Query(%s) = %v out of range (Hi %v)", step, what, q, lf, c.hi)
			}
			// The reference writes decay back at each Query (this test
			// queries every key each step), so linear decay composes
			// with float64 noise (docs/precision.md): allow 1e-12
			// relative.
			if lf < rf-1e-12*math.Max(1, math.Abs(rf)) {
				return rf - lf, fmt.Sprintf("step %d after %s: lock-free Query(%s) = %v < reference %v (clock %d)", step, what, q, lf, rf, clk.NowMillis())
			}
		}
	}
	return 0, ""
}

// TestAudit37NeverBelowReference: non-negative deltas, every law, clamps
// (Hi a float32, Hi not a float32, Hi = +Inf with a draining law), the
// clock stepping back, long idles and out-of-order At forms.
func TestAudit37NeverBelowReference(t *testing.T) {
	testsize.Serial(t)
	cases := []audit37Case{
		{"none-hi1e6", decay.None(), 0, 1e6, false, 10_000},
		{"none-hi0.1", decay.None(), 0, 0.1, false, 10_000},
		{"exp-hi1000", decay.Exponential(0.5), 0, 1000, false, 40 * 86400_000},
		{"exp-hiMax", decay.Exponential(2), 0, math.MaxFloat32, false, 40 * 86400_000},
		{"exp-hiInf", decay.Exponential(0.01), 0, math.Inf(1), false, 40 * 86400_000},
		{"linear-hi100", decay.Linear(3), 0, 100, false, 40 * 86400_000},
		{"linear-hi1e9+1", decay.Linear(1000), 0, 1e9 + 1, false, 40 * 86400_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(8) {
				if _, msg := audit37Run(t, c, seed, 1500); msg != "" {
					t.Fatalf("seed %d: %s", seed, msg)
				}
			}
		})
	}
}

// TestAudit37MixedSignVsReference: under mixed-sign deltas and a negative
// Lo the lock-free estimate is still never below the reference that saw
// the same history (docs/precision.md: "a lock-free cell is never below
// the reference cell that saw the same history"; "The rounding bias
// holds for negative deltas too").
func TestAudit37MixedSignVsReference(t *testing.T) {
	testsize.Serial(t)
	cases := []audit37Case{
		{"none-neglo", decay.None(), -50, 1000, true, 10_000},
		{"exp-neglo", decay.Exponential(0.5), -1e6, 1e6, true, 86400_000},
		{"linear-neglo", decay.Linear(2), -100, 100, true, 86400_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fails := 0
			for seed := range uint64(20) {
				if _, msg := audit37Run(t, c, seed, 1500); msg != "" {
					fails++
					if fails <= 2 {
						t.Logf("seed %d: %s", seed, msg)
					}
				}
			}
			if fails > 0 {
				t.Errorf("%d of 20 seeds went below the reference", fails)
			}
		})
	}
}
