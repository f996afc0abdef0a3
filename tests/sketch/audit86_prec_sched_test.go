package sketch_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit86precLaw is a decay law with its exact counterpart.
type audit86precLaw struct {
	name  string
	law   decay.Decay
	exact func(s *big.Float, dt int64) *big.Float // s decayed dt ms, exactly
}

func audit86precExpLaw(lambda float64) audit86precLaw {
	return audit86precLaw{fmt.Sprintf("Exponential(%g)", lambda), decay.Exponential(lambda), func(s *big.Float, dt int64) *big.Float {
		if dt <= 0 || s.Sign() == 0 {
			return s
		}
		return new(big.Float).SetPrec(audit86precBits).Mul(s, audit86precFactor(lambda, dt))
	}}
}

func audit86precLinLaw(rate float64) audit86precLaw {
	return audit86precLaw{fmt.Sprintf("Linear(%g)", rate), decay.Linear(rate), func(s *big.Float, dt int64) *big.Float {
		if dt <= 0 || s.Sign() == 0 {
			return s
		}
		// Exact: rate*dt/1000 as a rational, then compared at 320 bits
		// rounded toward the score's side only through Rat.
		r := new(big.Rat).SetFloat64(rate)
		r.Mul(r, big.NewRat(dt, 1000))
		sr, _ := s.Rat(nil)
		if s.Sign() > 0 {
			sr.Sub(sr, r)
			if sr.Sign() < 0 {
				sr.SetInt64(0)
			}
		} else {
			sr.Add(sr, r)
			if sr.Sign() > 0 {
				sr.SetInt64(0)
			}
		}
		return new(big.Float).SetPrec(audit86precStateBits).SetRat(sr) // wide enough to be exact for these schedules' compares
	}}
}

// audit86precHyp is a conforming custom law: hyperbolic decay,
// 1/v = 1/|s| + k*t (it composes exactly), computed in float64 and
// stepped two ulps to the safe side (up: away from 0 for a positive
// score, toward 0 for a negative one), so never below the exact law.
type audit86precHyp struct{ k float64 }

func (h audit86precHyp) Apply(s float64, dt int64) float64 {
	if dt <= 0 || s == 0 || s != s {
		return s
	}
	a := math.Abs(s)
	v := a / (1 + h.k*a*float64(dt)/1000)
	if s > 0 { // the safe side: away from 0
		return math.Min(math.Nextafter(math.Nextafter(v, math.Inf(1)), math.Inf(1)), a)
	}
	// a negative score: the safe side is toward 0
	return -math.Max(math.Nextafter(math.Nextafter(v, 0), 0), 0)
}

func audit86precHypLaw(k float64) audit86precLaw {
	return audit86precLaw{fmt.Sprintf("Hyperbolic(%g)", k), audit86precHyp{k}, func(s *big.Float, dt int64) *big.Float {
		if dt <= 0 || s.Sign() == 0 {
			return s
		}
		sr, _ := s.Rat(nil)
		neg := sr.Sign() < 0
		sr.Abs(sr)
		kt := new(big.Rat).Mul(audit86precRat(k), big.NewRat(dt, 1000))
		v := new(big.Rat).Quo(sr, new(big.Rat).Add(big.NewRat(1, 1), new(big.Rat).Mul(kt, sr)))
		if neg {
			v.Neg(v)
		}
		return new(big.Float).SetPrec(audit86precStateBits).SetRat(v)
	}}
}

// audit86precClamp clamps s to [lo, hi] exactly.
func audit86precClamp(s *big.Float, lo, hi float64) *big.Float {
	if s.Cmp(audit86precF(hi)) > 0 {
		return audit86precF(hi)
	}
	if s.Cmp(audit86precF(lo)) < 0 {
		return audit86precF(lo)
	}
	return s
}

// audit86precStateBits is the precision of a schedule's truth: enough
// for a sum of deltas from 1e-45 to 3e38 (about 420 bits) to stay exact.
const audit86precStateBits = 640

type audit86precStats struct {
	reads, admits, denies int
	worstRel              float64
	worstAbs              float64
}

// audit86precRun drives one key through a random schedule of Update,
// UpdateAndQuery, TryUpdate and Query (and the At forms) on the lock-free
// sketch and the reference, and checks every read against the exact
// truth S_i = clamp(decay(S_{i-1}, dt) + delta). It returns the first
// violation found (or "").
func audit86precRun(t *testing.T, lw audit86precLaw, lo, hi float64, levels uint32, seed uint64, steps int, st *audit86precStats,
	pickDT func(r *rand.Rand) int64, pickDelta func(r *rand.Rand) float64) string {
	r := rand.New(rand.NewPCG(seed, 86))
	fc := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: levels, CellsPerLevel: 1 << 12, Decay: lw.law, Lo: lo, Hi: hi, Clock: fc, Seed: seed}
	sk, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := "key"
	kb := []byte(key)
	now := int64(1_700_000_000_000) + int64(seed%1000)
	fc.Set(now)
	truth := audit86precF(0) // every cell starts at 0 at the epoch
	last := now
	where := func(i int, op string) string {
		return fmt.Sprintf("%s [%g, %g] L=%d seed %d step %d %s", lw.name, lo, hi, levels, seed, i, op)
	}
	check := func(i int, op string, got float64, tr *big.Float) string {
		st.reads++
		if audit86precBelow(got, tr) {
			tf, _ := tr.Float64()
			if got == 0 && audit86precTiny(tr) && tr.Sign() > 0 {
				return "" // the documented underflow to 0
			}
			return fmt.Sprintf("%s: read %v below the exact %v (%s; rel %g)", where(i, op), got, tf, audit86precText(tr), audit86precRel(got, tr))
		}
		if tf, _ := new(big.Float).Abs(tr).Float64(); tf >= 1e-30 {
			if rel := audit86precRel(got, tr); rel > st.worstRel {
				st.worstRel = rel
			}
		}
		tf, _ := tr.Float64()
		if d := got - tf; d > st.worstAbs {
			st.worstAbs = d
		}
		return ""
	}
	for i := range steps {
		now += pickDT(r)
		fc.Set(now)
		dt := now - last
		decayed := lw.exact(truth, dt)
		delta := pickDelta(r)
		switch op := r.IntN(5); op {
		case 0: // Update
			if r.IntN(2) == 0 {
				sk.Update(kb, delta)
			} else {
				sk.UpdateAt(fc.Now(), key, delta)
			}
			truth = audit86precClamp(new(big.Float).SetPrec(audit86precStateBits).Add(decayed, audit86precF(delta)), lo, hi)
			last = now
		case 1: // UpdateAndQuery: the aggregate of the stored scores
			got := sk.UpdateAndQuery(kb, delta)
			truth = audit86precClamp(new(big.Float).SetPrec(audit86precStateBits).Add(decayed, audit86precF(delta)), lo, hi)
			last = now
			if msg := check(i, "UpdateAndQuery", got, truth); msg != "" {
				return msg
			}
		case 2: // TryUpdate against a limit near the truth
			tf, _ := new(big.Float).Add(decayed, audit86precF(delta)).Float64()
			limit := tf
			switch r.IntN(4) {
			case 0:
				limit = math.Nextafter(tf, math.Inf(-1))
			case 1:
				limit = math.Nextafter(tf, math.Inf(1))
			case 2:
				limit = tf * (1 + 1e-7*(r.Float64()-0.5))
			}
			est := sk.Query(kb) // Query only reads: the decision's aggregate
			if msg := check(i, "Query before TryUpdate", est, decayed); msg != "" {
				return msg
			}
			ok := sk.TryUpdate(kb, delta, limit)
			exactSum := new(big.Float).SetPrec(audit86precStateBits).Add(decayed, audit86precF(delta))
			estSum := new(big.Float).SetPrec(audit86precStateBits).Add(audit86precF(est), audit86precF(delta))
			if ok {
				st.admits++
				// Never admit what the exact truth denies, save the
				// documented float64 compare of aggregate + delta.
				underflow := est == 0 && audit86precTiny(decayed) // documented
				if !underflow && exactSum.Cmp(audit86precF(limit)) > 0 && estSum.Cmp(audit86precF(limit)) <= 0 {
					return fmt.Sprintf("%s: TryUpdate(%v, limit %v) admitted; exact truth + delta = %s > limit (estimate %v)",
						where(i, "TryUpdate"), delta, limit, audit86precText(exactSum), est)
				}
				truth = audit86precClamp(exactSum, lo, hi)
				last = now
			} else {
				st.denies++
			}
		case 3:
			got := sk.Query(kb)
			if r.IntN(2) == 0 {
				got = sk.QueryAt(fc.Now(), key)
			}
			if msg := check(i, "Query", got, decayed); msg != "" {
				return msg
			}
		case 4: // Detail: every level
			d := sk.QueryDetailed(kb)
			for lv, ld := range d.Levels {
				v := ld.Score
				if msg := check(i, fmt.Sprintf("QueryDetailed level %d", lv), v, decayed); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

func audit86precDTs(r *rand.Rand) int64 {
	switch r.IntN(40) {
	case 0:
		return []int64{1 << 16, 1<<24 - 1, 1<<24 + 3, 1<<29 + 1, 1<<31 - 1, 1<<31 + 5, 1<<32 + 9}[r.IntN(7)]
	case 1, 2:
		return r.Int64N(100_000)
	}
	return r.Int64N(4)
}

func audit86precDeltaFn(neg bool, scale float64) func(r *rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		var d float64
		switch r.IntN(6) {
		case 0:
			d = scale * r.Float64()
		case 1:
			d = scale * 1e-9 * r.Float64() // tiny: below a float32 ulp of the score
		case 2:
			d = float64(math.SmallestNonzeroFloat32) * float64(1+r.IntN(3))
		case 3:
			d = math.Round(scale * r.Float64())
		case 4:
			d = 0.1
		default:
			d = scale
		}
		if neg && r.IntN(2) == 0 {
			d = -d
		}
		return d
	}
}

// TestAudit86PrecSchedules: random schedules (fixed seeds) of one key
// under extreme laws and bounds; every read of the lock-free sketch is at
// or above the exact truth ("Query(k) >= the key's true score ... whatever
// the clamps, roll-backs, refunds, rotations, clock jumps", API.md; for a
// negative score, never more negative), and no TryUpdate is admitted that
// the exact truth denies beyond the documented float64 compare.
func TestAudit86PrecSchedules(t *testing.T) {
	testsize.Serial(t)
	laws := []audit86precLaw{
		audit86precExpLaw(1e-12), audit86precExpLaw(1e-6), audit86precExpLaw(math.Ln2 / 10),
		audit86precExpLaw(1), audit86precExpLaw(1e3), audit86precExpLaw(1e6),
		audit86precHypLaw(1e-3), audit86precHypLaw(10),
		// Linear since its drain rounds up (TestAudit86PrecFixedLinear*).
		audit86precLinLaw(0.1), audit86precLinLaw(3), audit86precLinLaw(1e6),
	}
	bounds := [][2]float64{{0, 1e9}, {-1e6, 1e6}, {-math.MaxFloat32, math.MaxFloat32}, {-100, 0.1}, {-1e-30, 1e-30}}
	scales := []float64{1, 1e-38, 1e30, 1e-3}
	steps := testsize.Pick(100, 30)
	var st audit86precStats
	fails := 0
	for li, lw := range laws {
		for bi, b := range bounds {
			for si, sc := range scales {
				seed := uint64(li*100 + bi*10 + si)
				levels := uint32(1 + (li+bi+si)%4)
				msg := audit86precRun(t, lw, b[0], b[1], levels, seed, steps, &st, audit86precDTs, audit86precDeltaFn(b[0] < 0, sc))
				if msg != "" {
					fails++
					if fails <= 15 {
						t.Error(msg)
					}
				}
			}
		}
	}
	t.Logf("reads %d, admitted %d, denied %d, worst over-estimate rel %g (truth >= 1e-30), abs %g; failing schedules %d",
		st.reads, st.admits, st.denies, st.worstRel, st.worstAbs, fails)
}

// audit86precText prints x to 25 digits, or as a float64 when its
// exponent is out of float64 range (decimal conversion of 2^-1e9 is slow).
func audit86precText(x *big.Float) string {
	if e := x.MantExp(nil); e < -1100 || e > 1100 {
		f, _ := x.Float64()
		return fmt.Sprint(f)
	}
	return x.Text('g', 25)
}
