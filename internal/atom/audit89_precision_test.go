package atom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestAudit89AtomPrecisionDocNumbers: the worked numbers of
// docs/precision.md's "The rounding rule" and "How big the error gets",
// through RoundUp, NewRules and RoundSum/Next.
func TestAudit89AtomPrecisionDocNumbers(t *testing.T) {
	testsize.Serial(t)
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.12g, precision.md says %.12g", name, got, want)
		}
	}
	near("RoundUp(0.1)", float64(RoundUp(0.1)), 0.10000000149, 1e-11)
	near("RoundUp(-0.1)", float64(RoundUp(-0.1)), -0.09999999404, 1e-11)
	none := NewRules(decay.None(), 0, math.MaxFloat32)
	if got := none.RoundSum(1e6, 1e-5); got != 1000000.0625 {
		t.Errorf("1e6 + 1e-5 stored as %v, precision.md says 1000000.0625", got)
	}
	if got := RoundUp(1<<24 + 1); got != 16777218 {
		t.Errorf("RoundUp(2^24 + 1) = %v, precision.md says 16777218", got)
	}
	if got := none.RoundSum(1<<60, 1); float64(got) != 1<<60+1<<37 {
		t.Errorf("2^60 + 1 stored as %v, precision.md says 2^60 + 2^37", got)
	}
	// Bounds rounded up; an infinite bound is MaxFloat32.
	if r := NewRules(nil, 0, 1e12); r.Hi() != 1000000061440 {
		t.Errorf("Hi = 1e12 held as %v, precision.md says 1000000061440", r.Hi())
	}
	if r := NewRules(nil, -100, 1000); r.Lo() != -100 || r.Hi() != 1000 {
		t.Errorf("Lo = -100, Hi = 1000 held as %v, %v", r.Lo(), r.Hi())
	}
	if r := NewRules(nil, math.Inf(-1), math.Inf(1)); r.Lo() != -math.MaxFloat32 || r.Hi() != math.MaxFloat32 {
		t.Errorf("infinite bounds held as %v, %v, want ±MaxFloat32", r.Lo(), r.Hi())
	}
	if r := NewRules(nil, -0.1, 0.1); r.Lo() < -0.1 || r.Hi() < 0.1 {
		t.Errorf("bounds -0.1, 0.1 held as %v, %v: below the configured ones", r.Lo(), r.Hi())
	}
	// Saturation, never Inf.
	for _, c := range []struct{ x, want float64 }{{math.Inf(1), math.MaxFloat32}, {math.Inf(-1), -math.MaxFloat32},
		{1e39, math.MaxFloat32}, {-1e39, -math.MaxFloat32}, {math.MaxFloat64, math.MaxFloat32}, {-math.MaxFloat64, -math.MaxFloat32},
		{1e-300, math.SmallestNonzeroFloat32}, {math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat32}} {
		if got := RoundUp(c.x); float64(got) != c.want {
			t.Errorf("RoundUp(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := RoundUp(-1e-300); got != 0 || !(float64(got) >= -1e-300) {
		t.Errorf("RoundUp(-1e-300) = %v, want 0 (toward +Inf)", got)
	}
	inf := NewRules(nil, math.Inf(-1), math.Inf(1))
	for _, c := range []struct{ a, b, want float64 }{{math.MaxFloat32, math.MaxFloat32, math.MaxFloat32},
		{math.MaxFloat32, math.MaxFloat64, math.MaxFloat32}, {-math.MaxFloat32, -math.MaxFloat64, -math.MaxFloat32},
		{-math.MaxFloat32, math.MaxFloat64, math.MaxFloat32}} {
		if got := inf.RoundSum(c.a, c.b); float64(got) != c.want {
			t.Errorf("RoundSum(%v, %v) under infinite bounds = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	// 1000 adds of 1e14 to 2^100: 2^100 + 1000 float32 ulps of 2^77.
	w := Pack(float32(math.Ldexp(1, 100)), 5)
	for range 1000 {
		w = inf.Next(w, 5, 1e14)
	}
	if got, want := float64(w.Score()), math.Ldexp(1, 100)+1000*math.Ldexp(1, 77); got != want {
		t.Errorf("1000 adds of 1e14 to 2^100 = %v, precision.md says 2^100 + 1000 x 2^77 = %v", got, want)
	}
	// Workload c: 1e6, then +1e-5 100,000 times: exactly 1,006,250.
	w = Pack(1e6, 0)
	for range 100000 {
		w = none.Next(w, 0, 1e-5)
	}
	if w.Score() != 1006250 {
		t.Errorf("workload c ends at %v, precision.md says exactly 1,006,250", w.Score())
	}
	// Workload e: from 2^24 - 100,000, +1 a million times: 18,577,216.
	w = Pack(1<<24-100000, 0)
	for range 1000000 {
		w = none.Next(w, 0, 1)
	}
	if w.Score() != 18577216 {
		t.Errorf("workload e ends at %v, precision.md says exactly 18,577,216", w.Score())
	}
	// n tiny adds grow a score by (1 + 2^-23)^n at most: 12.7% after a
	// million (from 1, where one ulp is 2^-23 of the score).
	w = Pack(1, 0)
	for range 1000000 {
		w = none.Next(w, 0, 1e-30)
	}
	if got := float64(w.Score()); got != 1+1e6*0x1p-23 || got > math.Pow(1+0x1p-23, 1e6) {
		t.Errorf("a million adds of 1e-30 to 1 read %v, want 1 + 10^6 x 2^-23 <= (1 + 2^-23)^10^6", got)
	}
	if b := math.Pow(1+0x1p-23, 1e6) - 1; math.Abs(b-0.127) > 0.0005 {
		t.Errorf("(1 + 2^-23)^10^6 - 1 = %v, precision.md says 12.7%%", b)
	}
	// Integers below 2^24 have no rounding at all.
	for _, x := range []float64{0, 1, -1, 1<<24 - 1, -(1<<24 - 1), 1 << 24, 12345678} {
		if float64(RoundUp(x)) != x {
			t.Errorf("RoundUp(%v) = %v", x, RoundUp(x))
		}
	}
}

// TestAudit89AtomExtrapolatedCount: precision.md's "Extrapolated (same
// rule, not run): 3e7 increments of 1 from 0 would read 52,891,136", run.
func TestAudit89AtomExtrapolatedCount(t *testing.T) {
	testsize.Serial(t)
	none := NewRules(decay.None(), 0, math.MaxFloat32)
	var s float32
	for range 30000000 {
		s = none.RoundSum(float64(s), 1)
	}
	if s != 52891136 {
		t.Errorf("3e7 increments of 1 from 0 read %v, precision.md says 52,891,136", s)
	}
}

// TestAudit89AtomLinearNegativeDoc: precision.md's Linear example, Lo =
// -2^40, Linear(0.05), 10^6 writes 1 ms apart: "read -1.034e12 for an
// exact -1.0995e12, 6% toward 0": never below the exact -2^40 + 50.
func TestAudit89AtomLinearNegativeDoc(t *testing.T) {
	testsize.Serial(t)
	r := NewRules(decay.Linear(0.05), -math.Ldexp(1, 40), 1)
	w := Pack(float32(-math.Ldexp(1, 40)), 0)
	for i := range 1000000 {
		w = r.Next(w, uint32(i+1), 0)
	}
	got := r.Value(w, 1000000)
	if math.Abs(got/-1.034e12-1) > 5e-4 {
		t.Errorf("10^6 writes read %v, precision.md says -1.034e12", got)
	}
	if exact := -math.Ldexp(1, 40) + 50; got < exact {
		t.Errorf("10^6 writes read %v below the exact %v", got, exact)
	}
	if f := 1 - got/(-math.Ldexp(1, 40)+50); math.Abs(f-0.06) > 0.005 {
		t.Errorf("%.3f toward 0, precision.md says 6%%", f)
	}
}

// TestAudit89AtomSlowExponentialNeverGrows: "A law whose 1 ms factor is
// within 2^-39 of 1 ... now skips the tables, and the math.Exp path caps
// the nudged value at the score": Exponential(1e-10), 100,000 zero adds
// 1 ms apart on 1000 (1006.1 before, audit 37) stays at or below 1000,
// for positive and negative scores, through Next and NextN.
func TestAudit89AtomSlowExponentialNeverGrows(t *testing.T) {
	testsize.Serial(t)
	for _, lam := range []float64{1e-10, 1.8e-9, 1.9e-9, 1e-8} {
		r := NewRules(decay.Exponential(lam), -1e9, 1e9)
		for _, s0 := range []float32{1000, -1000, 16777215, 1.5} {
			w := Pack(s0, 0)
			var ws, nws [MaxCells]Word
			ws[0], ws[1] = w, w
			for i := range 100000 {
				w = r.Next(w, uint32(i+1), 0)
				r.NextN(&ws, 2, uint32(i+1), 0, &nws)
				ws = nws
			}
			for _, got := range []float32{w.Score(), ws[0].Score(), ws[1].Score()} {
				if math.Abs(float64(got)) > math.Abs(float64(s0)) || got*s0 < 0 {
					t.Errorf("Exponential(%v): %v after 100,000 zero adds 1 ms apart reads %v", lam, s0, got)
				}
			}
		}
	}
}

// TestAudit89AtomTinyUnderflowReachesZero: precision.md's "Scores below
// 1e-290": "an exact underflow stays 0, so a decayed score still reaches
// 0 rather than being floored at the smallest float32 (1.4e-45)": a cell
// at the smallest float32 under Exponential(1) reads and stores 0 after
// a gap whose exact decay underflows float64 (700 s: 1.4e-349), and stays
// at the smallest float32 (never 0, never below the truth) after one
// that does not (600 s: 3.6e-306), through Value, Next, NextN, ValueLater.
func TestAudit89AtomTinyUnderflowReachesZero(t *testing.T) {
	r := NewRules(decay.Exponential(1), 0, 1e9)
	w := Pack(math.SmallestNonzeroFloat32, 7)
	for _, c := range []struct {
		gap  uint32
		zero bool
	}{{700000, true}, {1 << 24, true}, {600000, false}, {1000, false}} {
		now := 7 + c.gap
		v := r.Value(w, now)
		var ws, nws [MaxCells]Word
		ws[0] = w
		r.NextN(&ws, 1, now, 0, &nws)
		nw := r.Next(w, now, 0)
		if c.zero {
			if v != 0 || nw.Score() != 0 || nws[0].Score() != 0 || r.ValueLater(w, 7, int64(c.gap)) != 0 {
				t.Errorf("gap %d ms: Value %v, Next %v, NextN %v: want 0 (an exact underflow)", c.gap, v, nw.Score(), nws[0].Score())
			}
			continue
		}
		if !(v > 0) || nw.Score() != math.SmallestNonzeroFloat32 || nws[0] != nw {
			t.Errorf("gap %d ms: Value %v, Next %v, NextN %v: want > 0 and the smallest float32 stored", c.gap, v, nw.Score(), nws[0].Score())
		}
	}
}

// TestAudit89AtomValueAgreement: Value, ValueN (the batch), ValueLater
// (x = 0) and Next/NextN/Apply/ApplyN agree bit for bit on random words
// for every provided law and a custom one, stamps on both sides of now
// and across the 2^32 wrap; Elapsed and Newer are modular; ValueLater is
// non-increasing in magnitude as x grows past 2^31 and 2^32 ms.
func TestAudit89AtomValueAgreement(t *testing.T) {
	rng := rand.New(rand.NewPCG(89, 20))
	laws := []decay.Decay{nil, decay.None(), decay.Exponential(1e-12), decay.Exponential(0.5), decay.Exponential(300),
		decay.Linear(0.3), decay.Linear(7000), audit89Half{}}
	for li, d := range laws {
		r := NewRules(d, -1e30, 1e30)
		for range 2000 {
			n := uint32(1 + rng.IntN(MaxCells))
			now := rng.Uint32()
			var ws, nws, nws2 [MaxCells]Word
			var vs, vs2 [MaxCells]float64
			for i := range n {
				s := float32(math.Ldexp(1+rng.Float64(), rng.IntN(200)-120))
				switch rng.IntN(6) {
				case 0:
					s = 0
				case 1:
					s = -s
				case 2:
					s = math.SmallestNonzeroFloat32
				}
				var age uint32
				switch rng.IntN(4) {
				case 0:
					age = rng.Uint32() // any age, ahead of now too
				case 1:
					age = 0
				default:
					age = uint32(rng.IntN(1 << uint(rng.IntN(31))))
				}
				ws[i] = Pack(s, now-age)
			}
			lowest := r.ValueN(&ws, n, now, &vs)
			want := math.Inf(1)
			delta := float64(rng.IntN(5))
			for i := range n {
				v := r.Value(ws[i], now)
				if math.Float64bits(v) != math.Float64bits(vs[i]) {
					t.Fatalf("law %d: ValueN[%d] = %v, Value = %v", li, i, vs[i], v)
				}
				if l := r.ValueLater(ws[i], now, 0); math.Float64bits(l) != math.Float64bits(v) {
					t.Fatalf("law %d: ValueLater(x=0) = %v, Value = %v", li, l, v)
				}
				want = min(want, v)
				vs2[i] = v
				if a, b := r.Next(ws[i], now, delta), r.Apply(ws[i], v, now, delta); a != b {
					t.Fatalf("law %d: Next %x, Apply %x", li, a, b)
				}
			}
			if lowest != want {
				t.Fatalf("law %d: ValueN lowest %v, want %v", li, lowest, want)
			}
			r.NextN(&ws, n, now, delta, &nws)
			r.ApplyN(&ws, &vs2, n, now, delta, &nws2)
			for i := range n {
				if nx := r.Next(ws[i], now, delta); nws[i] != nx || nws2[i] != nx {
					t.Fatalf("law %d: NextN %x, ApplyN %x, Next %x", li, nws[i], nws2[i], nx)
				}
			}
			// ValueLater past the horizon: never grows in magnitude with x.
			w := ws[0]
			prev := math.Abs(r.ValueLater(w, now, 0))
			for _, x := range []int64{1, 1 << 30, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1 << 32, 1<<32 + 5, 1 << 40, 1 << 53} {
				v := math.Abs(r.ValueLater(w, now, x))
				if v > prev || math.IsNaN(v) {
					t.Fatalf("law %d: ValueLater(%v, +%d) = %v grew from %v", li, w.Score(), x, v, prev)
				}
				prev = v
			}
		}
	}
	for _, c := range []struct {
		stamp, now uint32
		el         int64
		newer      uint32
	}{{math.MaxUint32 - 4, 10, 15, 10}, {10, math.MaxUint32 - 4, 0, 10}, {0, 1<<31 - 1, 1<<31 - 1, 1<<31 - 1},
		{0, 1 << 31, 0, 0}, {5, 5, 0, 5}, {1 << 31, 0, 0, 1 << 31}, {1<<31 + 1, 0, 1<<31 - 1, 0}} {
		if got := Elapsed(c.stamp, c.now); got != c.el {
			t.Errorf("Elapsed(%d, %d) = %d, want %d", c.stamp, c.now, got, c.el)
		}
		if got := Newer(c.stamp, c.now); got != c.newer {
			t.Errorf("Newer(%d, %d) = %d, want %d", c.stamp, c.now, got, c.newer)
		}
	}
}

// audit89Half is a custom law: half the score per elapsed second, in
// whole seconds (superadditive enough for the checks above).
type audit89Half struct{}

func (audit89Half) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return math.Ldexp(s, -int(min(dt/1000, 2000)))
}

// TestAudit89AtomDecayedCounterBound: precision.md, "How big the error
// gets": "Under exponential decay the excess decays like the score, so a
// decayed counter's relative error stays below (score/delta)*2^-23": a
// cell fed +delta every k ms under Exponential(lambda) for 60 s (the a1
// workload's shape, and slower laws whose score/delta reaches 1e5),
// checked after every event against the closed-form truth
// delta x (1 - q^n)/(1 - q), q = e^(-lambda k/1000): never below it, and
// above it by less than (truth/delta) x 2^-23 relative.
func TestAudit89AtomDecayedCounterBound(t *testing.T) {
	for _, c := range []struct {
		lambda, delta float64
		k             int64
	}{{math.Ln2 / 10, 1, 1}, {0.01, 1, 1}, {0.001, 1, 3}, {1, 1, 1}, {math.Ln2 / 10, 0.37, 10}, {0.05, 3.3, 2}} {
		r := NewRules(decay.Exponential(c.lambda), 0, 1e12)
		q := math.Exp(-c.lambda * float64(c.k) / 1000)
		var w Word
		worst := 0.0
		for n := int64(1); n*c.k <= 60000; n++ {
			now := uint32(n * c.k)
			w = r.Next(w, now, c.delta)
			truth := c.delta * -math.Expm1(float64(n)*math.Log(q)) / -math.Expm1(math.Log(q))
			got := r.Value(w, now)
			rel := got/truth - 1
			if rel < -1e-12 {
				t.Fatalf("lambda %v, +%v every %d ms: event %d reads %v below the truth %v", c.lambda, c.delta, c.k, n, got, truth)
			}
			if bound := truth / c.delta * 0x1p-23; rel >= bound {
				t.Fatalf("lambda %v, +%v every %d ms: event %d reads %v, %.3g above the truth %v; precision.md bounds it by (score/delta) x 2^-23 = %.3g",
					c.lambda, c.delta, c.k, n, got, rel, truth, bound)
			}
			worst = max(worst, rel)
		}
		t.Logf("lambda %v, +%v every %d ms: worst relative excess %.3g", c.lambda, c.delta, c.k, worst)
	}
}

// TestAudit89AtomSlowLawSweepFloorsAtSmallestFloat32: precision.md,
// "Scores below 1e-290" (audit 89 found its earlier wording false): an
// exact float64 underflow brings a score to 0, but in a busy sketch an
// idle cell is re-stamped by the horizon sweep every 2^29 to 2^30 ms
// (Rebase), each time rounded up to a float32; under a law slower than
// about 6e-4/s no sweep's gap underflows, so the cell settles at the
// smallest float32 and stays there: Exponential(1e-4), a cell of 1 swept
// 100 times at ages of 2^30 ms (truth e^-10737) holds 1.4e-45, above its
// truth by at most that and never below it. A faster law's sweep gap
// underflows and the cell reads 0.
func TestAudit89AtomSlowLawSweepFloorsAtSmallestFloat32(t *testing.T) {
	sweep := func(lambda float64) float32 {
		r := NewRules(decay.Exponential(lambda), 0, 1e9)
		s := float32(1)
		for range 100 {
			s, _ = r.Rebase(float64(s), 1<<30, 1<<29)
		}
		return s
	}
	if s := sweep(1e-4); s != math.SmallestNonzeroFloat32 {
		t.Errorf("Exponential(1e-4): 1 swept 100 times at ages of 2^30 ms holds %v (truth e^-10737); precision.md: it settles at the smallest float32, 1.4e-45", s)
	}
	if s := sweep(1e-2); s != 0 {
		t.Errorf("Exponential(1e-2): a sweep gap of 2^30 ms underflows (x about 1e7), yet the cell holds %v; precision.md: an exact underflow stays 0", s)
	}
}
