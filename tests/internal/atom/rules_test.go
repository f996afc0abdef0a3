package atom_test

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/law"
)

// customExp is a lw outside package decay (KindCustom) with the same
// formula as decay.Exponential.
type customExp struct{ lambda float64 }

func (c customExp) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp(-c.lambda*float64(dt)/1000)
}

// lawGen draws a lw of every kind Rules specialises, with a nil lw (None)
// among them.
func lawGen() *rapid.Generator[decay.Decay] {
	return rapid.Custom(func(t *rapid.T) decay.Decay {
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			return decay.None()
		case 1:
			return nil
		case 2:
			return decay.Linear(rapid.Float64Range(1e-3, 1e4).Draw(t, "rate"))
		case 3:
			return decay.Exponential(rapid.Float64Range(1e-4, 50).Draw(t, "lambda"))
		default:
			return customExp{rapid.Float64Range(1e-4, 50).Draw(t, "lambda")}
		}
	})
}

// lawOf is the reference lw Rules stands for (nil means None).
func lawOf(d decay.Decay) decay.Decay {
	if d == nil {
		return decay.None()
	}
	return d
}

// gapGen draws gaps in [0, 2^32) ms covering both Exponential paths: the
// table (dt < 2^24) and math.Exp (dt >= 2^24), and the edge between them.
func gapGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, 1<<24-1),
		rapid.Int64Range(1<<24, 1<<32-1),
		rapid.Int64Range(1<<24-300, 1<<24+300),
		rapid.Int64Range(0, 5000),
	)
}

// tinyDecay is the magnitude below which Rules.Decay may fall below the
// reference; see TestRulesDecaySubnormalFactor.
const tinyDecay = 1e-300

// checkDecayBound asserts Rules.Decay against the lw it stands for:
// never more decay than the lw (>=, for either sign), and within a relative
// 1e-11 of it (plus 1e-300 absolute). Below tinyDecay only the float32
// narrowing of the result is held to >=.
func checkDecayBound(t rapid.TB, r *atom.Rules, lw decay.Decay, s float64, dt int64) {
	t.Helper()
	got, want := r.Decay(s, dt), lw.Apply(s, dt)
	if !(math.Abs(got-want) <= 1e-11*math.Abs(want)+1e-300) {
		t.Fatalf("%T: Rules.Decay(%v, %d) = %v, lw gives %v: off by %g",
			lw, s, dt, got, want, math.Abs(got-want))
	}
	if got >= want {
		return
	}
	if math.Abs(want) >= tinyDecay {
		t.Fatalf("%T: Rules.Decay(%v, %d) = %v < lw's %v", lw, s, dt, got, want)
	}
	if atom.RoundUp(got) < atom.RoundUp(want) {
		t.Fatalf("%T: RoundUp(Rules.Decay(%v, %d)) = %v < RoundUp(lw's) = %v",
			lw, s, dt, atom.RoundUp(got), atom.RoundUp(want))
	}
}

func TestRulesDecay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := lawGen().Draw(t, "law")
		r := atom.NewRules(d, -1, 1)
		s := rapid.OneOf(
			rapid.Float64Range(-1e6, 1e6),
			rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e6, -1e6, 1, -1}),
		).Draw(t, "s")
		dt := gapGen().Draw(t, "dt")
		checkDecayBound(t, r, lawOf(d), s, dt)
	})
}

// TestRulesDecaySweep walks every gap below 2^16 ms and a stride of the
// rest of the table range for a few lambdas, so that every entry of the two
// low tables and many of the top one are used.
func TestRulesDecaySweep(t *testing.T) {
	stride := int64(1)
	if testing.Short() {
		stride = 7
	}
	for _, lambda := range []float64{1e-4, 0.01, 1, 7.5, 50} {
		d := decay.Exponential(lambda)
		r := atom.NewRules(d, -1, 1)
		for _, s := range []float64{1e6, -1e6, 3.7, -0.001} {
			for dt := int64(0); dt < 1<<16; dt += stride {
				checkDecayBound(t, r, d, s, dt)
			}
			for dt := int64(1 << 16); dt < 1<<24+1000; dt += 997 * stride {
				checkDecayBound(t, r, d, s, dt)
			}
		}
	}
}

// TestRulesDecaySubnormalFactor is the regression test for a bug, now fixed
// by the tinyDecayed fallback in Rules.Decay.
//
// Its doc says the exponential path "never decays more than
// decay.Exponential(lambda).Apply would", and expNudge's comment says the
// bias covers the table product's error. That holds while the decay factor
// exp(-lambda*dt/1000) is a normal float64, but when it is subnormal
// (lambda*dt/1000 > ~708, reachable on the table path, e.g. lambda=50 with
// dt ~ 14.2-14.9 s) the factor carries only a few significant bits, the
// product of three table entries can round below math.Exp of the whole gap,
// and a relative nudge of 2^-40 cannot cover it (v*expNudge is 0 for
// subnormal v). Rules.Decay then returns less than Apply: for positive
// scores a smaller value, for negative ones a more negative value, even
// where Apply underflows to -0. The error is below 1e-300 in absolute value
// and disappears in RoundUp unless a subnormal-sized delta is added, in
// which case Next stores a score below the float64 reference's.
func TestRulesDecaySubnormalFactor(t *testing.T) {
	tests := []struct {
		lambda float64
		s      float64
		dt     int64
	}{
		{50, 577968.4087883403, 14598},   // got 5.8933417577e-312 < 5.89334461324e-312
		{50, -420245.23598876206, 14871}, // got -6.228863e-318 < -4.15257e-318
		{37.3, -325133.63954418595, 19981},
		{1, 703221.5601172156, 721514},
	}
	for _, tt := range tests {
		d := decay.Exponential(tt.lambda)
		r := atom.NewRules(d, -1, 1)
		if got, want := r.Decay(tt.s, tt.dt), d.Apply(tt.s, tt.dt); got < want {
			t.Errorf("Exponential(%v): Rules.Decay(%v, %d) = %v < Apply = %v",
				tt.lambda, tt.s, tt.dt, got, want)
		}
	}
	// The same error reaches a stored word when a tiny delta lands between
	// the two results.
	d := decay.Exponential(50)
	r := atom.NewRules(d, -1, 1)
	s := float32(577968.4)
	const dt = 14598
	got, want := r.Decay(float64(s), dt), d.Apply(float64(s), dt)
	delta := -(got + want) / 2
	nw := r.Next(atom.Pack(s, 0), dt, delta)
	if exact := want + delta; float64(nw.Score()) < exact {
		t.Errorf("Next(Pack(%v, 0), %d, %v) stores %v < float64 reference %v",
			s, dt, delta, nw.Score(), exact)
	}
}

func TestNewRulesBounds(t *testing.T) {
	check := func(t rapid.TB, lo, hi float64) {
		t.Helper()
		r := atom.NewRules(decay.None(), lo, hi)
		for _, b := range []struct {
			name      string
			in, eff   float64
			saturated float64
		}{
			{"Lo", lo, r.Lo(), -math.MaxFloat32},
			{"Hi", hi, r.Hi(), math.MaxFloat32},
		} {
			if float64(float32(b.eff)) != b.eff || math.IsInf(b.eff, 0) {
				t.Fatalf("%s() = %v is not a finite float32 (NewRules(%v, %v))", b.name, b.eff, lo, hi)
			}
			if math.Abs(b.in) > math.MaxFloat32 {
				if b.eff != math.Copysign(math.MaxFloat32, b.in) {
					t.Fatalf("%s() = %v for %s = %v, want %v", b.name, b.eff, b.name, b.in, math.Copysign(math.MaxFloat32, b.in))
				}
				continue
			}
			if !(b.eff >= b.in) {
				t.Fatalf("%s() = %v < %s = %v", b.name, b.eff, b.name, b.in)
			}
			if prev := float64(math.Nextafter32(float32(b.eff), -inf32)); !(prev < b.in) {
				t.Fatalf("%s() = %v is not the smallest float32 >= %v", b.name, b.eff, b.in)
			}
		}
		// Lo < Hi need not survive: NewRules(-1e-46, 0) is [0, 0].
		if !(r.Lo() <= 0 && 0 <= r.Hi()) {
			t.Fatalf("NewRules(%v, %v): Lo() = %v, Hi() = %v, want Lo <= 0 <= Hi", lo, hi, r.Lo(), r.Hi())
		}
	}
	for _, b := range [][2]float64{
		{0, 1}, {-1, 0}, {-0.1, 0.1}, {math.Inf(-1), math.Inf(1)}, {-1e6, math.Inf(1)},
		{math.Inf(-1), 1e6}, {-1e300, 1e300}, {-1e-50, 1e-50}, {-math.MaxFloat32, math.MaxFloat32},
		{math.Nextafter(-math.MaxFloat32, math.Inf(-1)), math.Nextafter(math.MaxFloat32, math.Inf(1))},
	} {
		t.Run(fmt.Sprintf("lo=%v/hi=%v", b[0], b[1]), func(t *testing.T) { check(t, b[0], b[1]) })
	}
	r := atom.NewRules(nil, 0, math.Inf(1))
	if r.Hi() != math.MaxFloat32 {
		t.Errorf("Hi=+Inf: Hi() = %v, want MaxFloat32", r.Hi())
	}
	t.Run("rapid", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			lo := rapid.OneOf(rapid.Float64Range(-1e6, 0), rapid.Float64Range(math.Inf(-1), 0)).Draw(t, "lo")
			hi := rapid.OneOf(rapid.Float64Range(0, 1e6), rapid.Float64Range(0, math.Inf(1))).Draw(t, "hi")
			if lo == hi {
				hi = 1
			}
			check(t, lo, hi)
		})
	})
}

func TestRulesKind(t *testing.T) {
	tests := []struct {
		d    decay.Decay
		want law.Kind
	}{
		{nil, law.KindNone},
		{decay.None(), law.KindNone},
		{decay.Linear(1), law.KindLinear},
		{decay.Exponential(1), law.KindExponential},
		{customExp{1}, law.KindCustom},
	}
	for _, tt := range tests {
		if got := atom.NewRules(tt.d, -1, 1).Kind(); got != tt.want {
			t.Errorf("NewRules(%T).Kind() = %v, want %v", tt.d, got, tt.want)
		}
	}
}

// clamp is the float64 reference's clamp.
func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(v, hi)) }

// TestNext checks Next against the float64 reference: the exact result is
// clamp(lw.Apply(score, elapsed)+delta, Lo, Hi) in float64, and the
// decoded score must be >= it and at most one float32 step above it (for
// Exponential, above it plus the upward bias of Rules.Decay), never NaN or
// Inf, never outside [Lo(), Hi()]; the stamp never moves backwards.
func TestNext(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := lawGen().Draw(t, "law")
		lw := lawOf(d)
		lo := rapid.OneOf(
			rapid.Float64Range(-1e6, 0),
			rapid.SampledFrom([]float64{math.Inf(-1), 0, -1e-50, -math.MaxFloat32}),
		).Draw(t, "lo")
		hi := rapid.OneOf(
			rapid.Float64Range(0, 1e6),
			rapid.SampledFrom([]float64{math.Inf(1), 0, 1e-50, math.MaxFloat32}),
		).Draw(t, "hi")
		if lo == hi {
			hi = 1
		}
		r := atom.NewRules(d, lo, hi)
		score := rapid.OneOf(
			rapid.Float32Range(-1e6, 1e6),
			rapid.Float32(),
		).Draw(t, "score")
		stamp := rapid.Uint32().Draw(t, "stamp")
		now := stamp + uint32(rapid.OneOf(
			gapGen(),
			rapid.Int64Range(-5000, 0), // backwards
		).Draw(t, "step"))
		delta := rapid.OneOf(
			rapid.Float64Range(-1e6, 1e6),
			rapid.Float64Range(-1e40, 1e40),
			rapid.Just(0.0),
		).Draw(t, "delta")

		w := atom.Pack(score, stamp)
		nw := r.Next(w, now, delta)
		got := float64(nw.Score())
		el := atom.Elapsed(stamp, now)
		decayed := lw.Apply(float64(score), el)
		exact := clamp(decayed+delta, lo, hi)

		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("Next stored %v", got)
		}
		if got < r.Lo() || got > r.Hi() {
			t.Fatalf("Next stored %v outside [Lo(), Hi()] = [%v, %v]", got, r.Lo(), r.Hi())
		}
		if exact > math.MaxFloat32 {
			if got != math.MaxFloat32 {
				t.Fatalf("exact %v beyond float32: stored %v, want MaxFloat32", exact, got)
			}
		} else {
			if !(got >= exact) {
				t.Fatalf("Next stored %v < exact %v (decayed %v, delta %v, elapsed %d)",
					got, exact, decayed, delta, el)
			}
			// exact is the float64 sum, which may be below the exact
			// one by e (TwoSum's error), and Next rounds the exact sum
			// up (stop 49): one step above exact + e at most.
			// The float64 sum may land on a bound the exact sum is
			// inside of (-MaxFloat32 + 1 rounds to -MaxFloat32 = Lo):
			// the clamp does not apply then, and the error still counts.
			slack := 0.0
			if s := decayed + delta; s >= lo && s <= hi {
				bb := s - decayed
				e := (decayed - (s - bb)) + (delta - bb)
				if (s > lo || e > 0) && (s < hi || e < 0) {
					slack = e
				}
			}
			if r.Kind() == law.KindExponential {
				slack += 1e-11*math.Abs(decayed) + 1e-300 + 0x1p-52*(math.Abs(decayed)+math.Abs(delta))
			}
			if prev := float64(math.Nextafter32(nw.Score(), -inf32)); !(prev-exact < slack) {
				t.Fatalf("Next stored %v, more than one float32 step above exact %v (decayed %v, delta %v)",
					got, exact, decayed, delta)
			}
		}
		// Stamps never move backwards.
		if ns := nw.Stamp(); ns != atom.Newer(stamp, now) || int32(ns-stamp) < 0 {
			t.Fatalf("Next stamp %d from stamp %d at now %d", ns, stamp, now)
		}
		// Value is the float64 decayed score.
		if v := r.Value(w, now); v != r.Decay(float64(score), el) {
			t.Fatalf("Value = %v, Decay = %v", v, r.Decay(float64(score), el))
		}
		// Apply on the value is Next (TryUpdate's commit relies on it).
		if a := r.Apply(w, r.Value(w, now), now, delta); a != nw {
			t.Fatalf("Apply(w, Value(w, now), now, delta) = %v, Next = %v", a, nw)
		}
	})
}

// TestNextBackwardsNeverGrows: a clock that steps back is zero elapsed
// time, and the stamp stays.
func TestNextBackwardsNeverGrows(t *testing.T) {
	r := atom.NewRules(decay.Exponential(1), -100, 100)
	w := atom.Pack(50, 1000)
	const half = 1 << 31
	for _, now := range []uint32{999, 0, 1000 + half, 1000 + half + 1, 1000 + half + 12345} {
		nw := r.Next(w, now, 0)
		if nw != w {
			t.Errorf("Next(Pack(50, 1000), %d, 0) = (%v, %d), want unchanged", now, nw.Score(), nw.Stamp())
		}
	}
}

func TestRulesAllocs(t *testing.T) {
	for _, d := range []decay.Decay{decay.None(), decay.Linear(1), decay.Exponential(1), customExp{1}} {
		r := atom.NewRules(d, -1e6, 1e6)
		w := atom.Pack(100, 0)
		now := uint32(0)
		if n := testing.AllocsPerRun(1000, func() {
			now += 17
			w = r.Next(w, now, 1)
		}); n != 0 {
			t.Errorf("%T: Next allocates %v times per call", d, n)
		}
	}
}

// TestBatchN checks the batch forms against the per-word ones, word for
// word, for every law and a mix of fresh, aged and future stamps (the
// hot path handles a word stamped at or after now without decay, and
// hands an aged word to the decay law): ValueN[i] == Value(w[i], now)
// and its result is their Min (what aggregateOf returns for the Min
// aggregator); NextN[i] == Next(w[i], now, delta); ApplyN[i] ==
// Apply(w[i], ValueN[i], now, delta), and ApplyN reports "same" exactly
// when every new word is its old one.
func TestBatchN(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := lawGen().Draw(t, "law")
		lo := rapid.SampledFrom([]float64{0, -1e6, math.Inf(-1)}).Draw(t, "lo")
		hi := rapid.SampledFrom([]float64{1e6, 1e12, 100, math.Inf(1)}).Draw(t, "hi")
		r := atom.NewRules(d, lo, hi)
		n := rapid.IntRange(1, atom.MaxCells).Draw(t, "n")
		now := rapid.Uint32().Draw(t, "now")
		var w, nw, aw [atom.MaxCells]atom.Word
		var v [atom.MaxCells]float64
		for i := range n {
			score := rapid.OneOf(
				rapid.Float32Range(-1e6, 1e6),
				rapid.SampledFrom([]float32{0, float32(r.Hi()), float32(r.Lo()), 1}),
			).Draw(t, "score")
			score = float32(clamp(float64(score), r.Lo(), r.Hi()))
			age := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(-5, 5), gapGen()).Draw(t, "age")
			w[i] = atom.Pack(score, now-uint32(age))
		}
		delta := rapid.OneOf(
			rapid.Float64Range(-1e6, 1e6),
			rapid.SampledFrom([]float64{0, 1, 1e12, -1e12}),
		).Draw(t, "delta")

		lowest := r.ValueN(&w, uint32(n), now, &v)
		want := math.Inf(1)
		for i := range n {
			if x := r.Value(w[i], now); v[i] != x {
				t.Fatalf("ValueN[%d] = %v, Value = %v", i, v[i], x)
			}
			want = min(want, v[i])
		}
		if lowest != want {
			t.Fatalf("ValueN returned %v, Min of its values %v", lowest, want)
		}
		r.NextN(&w, uint32(n), now, delta, &nw)
		same := r.ApplyN(&w, &v, uint32(n), now, delta, &aw)
		allSame := true
		for i := range n {
			if x := r.Next(w[i], now, delta); nw[i] != x {
				t.Fatalf("NextN[%d] = %v, Next = %v", i, nw[i], x)
			}
			if x := r.Apply(w[i], v[i], now, delta); aw[i] != x {
				t.Fatalf("ApplyN[%d] = %v, Apply = %v", i, aw[i], x)
			}
			allSame = allSame && aw[i] == w[i]
		}
		if same != allSame {
			t.Fatalf("ApplyN reported same=%v, words say %v", same, allSame)
		}
	})
}
