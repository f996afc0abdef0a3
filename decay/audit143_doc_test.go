package decay_test

// Audit 143: a sentence-by-sentence read of decay's godoc (go doc -all
// ./decay), each behaviour it states checked here where earlier audits had
// not.

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a143Exact returns s moved toward 0 by rate x dt / 1000 and stopped at 0,
// in exact arithmetic (the float64 rate and age as given).
func a143Exact(s, rate float64, dt int64) *big.Float {
	const prec = 2200
	drain := new(big.Float).SetPrec(prec).SetFloat64(rate)
	drain.Mul(drain, new(big.Float).SetPrec(prec).SetInt64(dt))
	drain.Quo(drain, new(big.Float).SetPrec(prec).SetInt64(1000))
	v := new(big.Float).SetPrec(prec).SetFloat64(s)
	zero := new(big.Float).SetPrec(prec)
	if s > 0 {
		v.Sub(v, drain)
		if v.Sign() < 0 {
			return zero
		}
	} else if s < 0 {
		v.Add(v, drain)
		if v.Sign() > 0 {
			return zero
		}
	}
	return v
}

// TestAudit143LinearNeverBelowExactDrain: the package doc: "Linear(rate)
// moves s toward 0 by rate per second and stops at 0, its float64 result
// rounded toward +Inf (never below the exact drain of the float64 rate;
// exact drains ... come out exact, but for rates above about 1e289 a
// second, whose drain overflows a float64 product and is widened by 2^-51
// of itself, and below 2^-900 ...)". Checked against math/big for the
// wide rates (1e280 to MaxFloat64) and random ones, both signs: the result
// is never below the exact value, and for whole units a millisecond with a
// drain a float64 holds exactly it is exact.
func TestAudit143LinearNeverBelowExactDrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(143, 2))
	n := 4000
	if testing.Short() {
		n = 1500
	}
	for i := range n {
		var rate float64
		switch i % 3 {
		case 0:
			rate = math.Pow(10, 280+rng.Float64()*28.2)
			if rate > math.MaxFloat64 || math.IsInf(rate, 0) {
				rate = math.MaxFloat64
			}
		case 1:
			rate = math.Pow(10, -300+rng.Float64()*600)
		default:
			rate = float64(1+rng.IntN(1000)) * 1000
		}
		s := math.Pow(10, -300+rng.Float64()*608)
		if math.IsInf(s, 0) {
			s = math.MaxFloat64
		}
		if i%4 == 0 {
			s = float64(rng.IntN(1 << 20))
		}
		if rng.IntN(2) == 0 {
			s = -s
		}
		dt := int64(1 + rng.IntN(1<<uint(rng.IntN(40))))
		got := decay.Linear(rate).Apply(s, dt)
		exact := a143Exact(s, rate, dt)
		if new(big.Float).SetPrec(2200).SetFloat64(got).Cmp(exact) < 0 {
			ef, _ := exact.Float64()
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v, below the exact %v", rate, s, dt, got, ef)
		}
		if math.Abs(got) > math.Abs(s) || got*s < 0 {
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v: grew or crossed 0", rate, s, dt, got)
		}
		if i%3 == 2 && s == math.Trunc(s) && math.Abs(s) < 1<<20 && dt < 1<<20 {
			if ef, acc := exact.Float64(); acc == big.Exact && got != ef {
				t.Fatalf("whole units a ms: Linear(%v).Apply(%v, %d) = %v, want exactly %v", rate, s, dt, got, ef)
			}
		}
	}
}

// TestAudit143ProvidedLawsInterfaces: "Custom laws may implement Decay
// ...; they ... may implement Validator and Drainer so that sketch.New can
// check them"; Drainer: "laws that know whether they pull every finite
// score to 0"; None: "scores never decay". The provided laws answer
// Validate (nil when valid, an error naming the value when not) and Drains
// (true for Exponential and Linear, which drain, false for None, which
// never does).
func TestAudit143ProvidedLawsInterfaces(t *testing.T) {
	for _, c := range []struct {
		d      decay.Decay
		valid  bool
		drains bool
	}{
		{decay.None(), true, false},
		{decay.Exponential(0.5), true, true},
		{decay.Linear(2), true, true},
		{decay.Exponential(-3), false, false},
		{decay.Linear(0), false, false},
	} {
		v, ok := c.d.(decay.Validator)
		if !ok {
			t.Errorf("%#v is not a Validator", c.d)
			continue
		}
		if err := v.Validate(); (err == nil) != c.valid {
			t.Errorf("%#v: Validate() = %v", c.d, err)
		}
		dr, ok := c.d.(decay.Drainer)
		if !ok {
			t.Errorf("%#v is not a Drainer", c.d)
			continue
		}
		if c.valid && dr.Drains() != c.drains {
			t.Errorf("%#v: Drains() = %v, want %v", c.d, dr.Drains(), c.drains)
		}
	}
	for _, s := range []float64{1e300, -7, 5e-324} {
		if got := decay.None().Apply(s, math.MaxInt64); got != s {
			t.Errorf("None().Apply(%v, MaxInt64) = %v", s, got)
		}
	}
}

// TestAudit143ExponentialHalfLife: Exponential: "score*exp(-lambda*seconds):
// a half-life of ln(2)/lambda seconds"; Decay: "Implementations must be
// safe for concurrent use (the provided ones are immutable values)".
func TestAudit143ExponentialHalfLife(t *testing.T) {
	for _, lambda := range []float64{math.Ln2, math.Ln2 / 10, math.Ln2 * 4} {
		d := decay.Exponential(lambda)
		half := int64(math.Round(math.Ln2 / lambda * 1000))
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := int64(1); k <= 3; k++ {
					s := float64(8 * (g + 1))
					got := d.Apply(s, k*half)
					want := s / math.Exp2(float64(k))
					if math.Abs(got-want) > 1e-12*s {
						t.Errorf("Exponential(%v).Apply(%v, %d half-lives) = %v, want %v", lambda, s, k, got, want)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// TestAudit143FixedExpTableDecaysNegativeMoreThanLaw (audit 143; fixed
// at stop 65, the text below says what was wrong): decay/doc.go said the
// sketch evaluates Exponential "by table lookup, biased up by 2^-40 so it
// never decays more than the law". The bias is toward +Inf
// (docs/precision.md; atomiccell's Rules.Value: "never below the law's own
// result"), so a negative score decays MORE than the law: a cell of -1e6
// under Exponential(1) read 1234 ms later is -291125.7425958204 where the
// law gives -291125.74259608518. The doc now says so: "biased up by
// 2^-40, toward +Inf: a positive score never decays more than the law, a
// negative one never less". The test holds both directions.
func TestAudit143FixedExpTableDecaysNegativeMoreThanLaw(t *testing.T) {
	law := decay.Exponential(1)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_780_000_000_000)
	s, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 64, Lo: -1e9, Hi: 1e9, Decay: law, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("pos", 1e6)
	s.UpdateString("neg", -1e6)
	t0 := clk.Now()
	for _, dt := range []int64{1, 7, 1234, 20_000} {
		at := t0.Add(time.Duration(dt) * time.Millisecond)
		clk.SetTime(at) // an At form's t is held at the clock's reading
		if p, l := s.QueryAt(at, "pos"), law.Apply(1e6, dt); p < l {
			t.Errorf("+1e6 after %d ms: sketch %.17g below the law's %.17g (decayed more)", dt, p, l)
		}
		if n, l := s.QueryAt(at, "neg"), law.Apply(-1e6, dt); n < l {
			t.Errorf("-1e6 after %d ms: sketch %.17g below the law's %.17g (decayed less, against the bias toward +Inf)", dt, n, l)
		}
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", "")), " ")
	if !strings.Contains(doc, "a positive score never decays more than the law, a negative one never less") {
		t.Error("decay/doc.go no longer states the table's bias for both signs")
	}
}

// TestAudit143LinearExactDrainsExact: the package doc: "exact drains, such
// as whole units a millisecond, come out exact". Not only the whole-unit
// fast path (rates a multiple of 1000 up to 2^20 a ms): any rate and age
// whose drain rate x dt / 1000 is an integer (500 a second over even ms,
// 125 over multiples of 8 ms, 0.5 over whole seconds, whole units a ms
// past 2^20) on an integer score below 2^50 drains exactly.
func TestAudit143LinearExactDrainsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(143, 3))
	for range 20_000 {
		var rate float64
		var dt int64
		switch rng.IntN(4) {
		case 0:
			rate = float64(1+rng.IntN(1<<24)) * 1000
			dt = int64(1 + rng.IntN(1<<20))
		case 1:
			rate = 500 * float64(1+2*rng.IntN(1000))
			dt = 2 * int64(1+rng.IntN(1<<20))
		case 2:
			rate = 0.5
			dt = 2000 * int64(1+rng.IntN(1000))
		default:
			rate = 125
			dt = 8 * int64(1+rng.IntN(1<<20))
		}
		s := float64(rng.Int64N(1 << 50))
		if rng.IntN(2) == 0 {
			s = -s
		}
		drain := rate * float64(dt) / 1000 // an integer below 2^53: exact
		want := math.Max(math.Abs(s)-drain, 0)
		if s < 0 {
			want = -want
		}
		if got := decay.Linear(rate).Apply(s, dt); got != want && !(got == 0 && want == 0) {
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v, want exactly %v", rate, s, dt, got, want)
		}
	}
}
