package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/ref"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// ticker-driven Rotator that Close did not stop).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// near reports whether got is within the float32 rounding of want.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6+1e-4*math.Abs(want)
}

// TestModelVsReference drives the façade and the float64 mutex reference
// (built from the façade's own normalized config: same seed, hasher, clock)
// with one random operation sequence and requires equal answers up to the
// documented float32 rounding.
func TestModelVsReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := grudgetest.NewFakeClock()
		decays := []grudge.Decay{grudge.None, grudge.Exponential(0.5), grudge.Linear(2)}
		// The fourth is a user's function: the core and the reference both
		// run it through sketch.Config.AggregateFunc.
		aggs := []grudge.Aggregator{grudge.Min, grudge.Max, grudge.Mean, func(v []float64) float64 { return v[0] + v[len(v)-1] }}
		cfg := grudge.Config{
			Levels:        uint32(rapid.IntRange(1, 8).Draw(rt, "L")),
			CellsPerLevel: uint32(rapid.IntRange(1, 64).Draw(rt, "M")),
			Decay:         decays[rapid.IntRange(0, 2).Draw(rt, "decay")],
			Lo:            -100, Hi: 1000,
			Aggregator: aggs[rapid.IntRange(0, 3).Draw(rt, "agg")],
			Clock:      clock,
		}
		s, err := grudge.New(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		ref, err := ref.New(s.Native().Config())
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 100).Draw(rt, "n")
		for i := range n {
			clock.Advance(time.Duration(rapid.IntRange(0, 500).Draw(rt, "dt")) * time.Millisecond)
			key := []byte(fmt.Sprint("k", rapid.IntRange(0, 9).Draw(rt, "key")))
			delta := float64(rapid.IntRange(-20, 50).Draw(rt, "delta"))
			var got, want float64
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				s.Update(key, delta)
				ref.Update(key, delta)
				got, want = s.Query(key), ref.Query(key)
			case 1:
				got, want = s.UpdateAndQuery(key, delta), ref.UpdateAndQuery(key, delta)
			case 2:
				got, want = s.Query(key), ref.Query(key)
			case 3:
				d := s.QueryDetailed(key)
				r := ref.QueryDetailed(key)
				for l := range r.Levels {
					if d.CellIndexes[l] != r.Levels[l].Index {
						rt.Fatalf("op %d: level %d index %d, reference %d", i, l, d.CellIndexes[l], r.Levels[l].Index)
					}
				}
				got, want = d.Aggregate, r.Score
			}
			// float32 rounding: a few ulps of the largest magnitude a
			// cell may have held (Hi), which decay does not shrink.
			if tol := 1e-4*math.Abs(want) + 8*cfg.Hi*0x1p-23; math.Abs(got-want) > tol {
				rt.Fatalf("op %d: got %v, reference %v (tolerance %v)", i, got, want, tol)
			}
		}
	})
}

// TestDecayComposition checks the law grudge property-tests: decaying over
// a then b equals decaying over a+b, for the laws and in the sketch.
func TestDecayComposition(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		laws := []grudge.Decay{grudge.Exponential(rapid.Float64Range(0.001, 5).Draw(rt, "lambda")),
			grudge.Linear(rapid.Float64Range(0.001, 50).Draw(rt, "rate")), grudge.None}
		d := laws[rapid.IntRange(0, 2).Draw(rt, "law")]
		s0 := rapid.Float64Range(0, 1000).Draw(rt, "score")
		a := rapid.Int64Range(0, 100_000).Draw(rt, "a")
		b := rapid.Int64Range(0, 100_000).Draw(rt, "b")
		if two, one := d.Apply(d.Apply(s0, a), b), d.Apply(s0, a+b); !near(two, one) {
			rt.Fatalf("Apply(Apply(%v,%d),%d) = %v, Apply(%v,%d) = %v", s0, a, b, two, s0, a+b, one)
		}
		clock := grudgetest.NewFakeClock()
		s1, _ := grudge.New(grudge.Config{Lo: 0, Hi: 1000, Decay: d, Clock: clock})
		s2, _ := grudge.New(grudge.Config{Lo: 0, Hi: 1000, Decay: d, Clock: clock})
		k := []byte("k")
		s1.Update(k, s0)
		s2.Update(k, s0)
		clock.Advance(time.Duration(a) * time.Millisecond)
		s1.Query(k) // decays s1's cells at a; s2 decays once at a+b
		clock.Advance(time.Duration(b) * time.Millisecond)
		if q1, q2 := s1.Query(k), s2.Query(k); !near(q1, q2) || !near(q2, d.Apply(s0, a+b)) {
			rt.Fatalf("split %v, whole %v, law %v", q1, q2, d.Apply(s0, a+b))
		}
	})
}

// TestDeterminism: the same operations at the same times give the same
// scores, whatever seed each sketch drew (no collisions at this size).
func TestDeterminism(t *testing.T) {
	run := func() []float64 {
		clock := grudgetest.NewFakeClock()
		s, err := grudge.New(grudge.Config{Lo: 0, Hi: 100, Decay: grudge.Exponential(0.1), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for i := range 200 {
			clock.Advance(time.Duration(i%7) * 100 * time.Millisecond)
			out = append(out, s.UpdateAndQuery([]byte(fmt.Sprint("key", i%5)), float64(i%3)))
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("op %d: %v then %v", i, a[i], b[i])
		}
	}
}

// waitRotations polls as a grudge user does.
func waitRotations(t *testing.T, r *grudge.Rotator, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for r.Rotations() < n {
		if time.Now().After(deadline) {
			t.Fatalf("Rotations() = %d, want %d", r.Rotations(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRotationTicker: with a Ticker, each Tick is one rotation, visible
// right after Tick returns; a key written before a rotation is still
// scored after it (the promoted generation was written all along: warm
// start), and is forgotten after Generations rotations without writes.
func TestRotationTicker(t *testing.T) {
	ticker := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 100}, Generations: 3, Period: time.Minute, Ticker: ticker,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := []byte("k")
	r.Update(k, 5)
	for i := int64(1); i <= 2; i++ {
		ticker.Tick()
		if got := r.Rotations(); got != i {
			t.Fatalf("after tick %d Rotations() = %d", i, got)
		}
		if got := r.Query(k); got != 5 {
			t.Fatalf("after rotation %d Query = %v, want 5 (warm start)", i, got)
		}
	}
	ticker.Tick()
	waitRotations(t, r, 3)
	if got := r.Query(k); got != 0 {
		t.Fatalf("after 3 rotations of 3 generations Query = %v, want 0", got)
	}
	// Writes reach every generation, so the next primary has them too.
	r.Update(k, 2)
	ticker.Tick()
	waitRotations(t, r, 4)
	if got := r.Query(k); got != 2 {
		t.Fatalf("Query = %v, want 2", got)
	}
}

// TestRotationLazy: without a Ticker the rotator rotates on access when a
// Period is over (no goroutine: goleak would see one), with the same
// warm start and forgetting.
func TestRotationLazy(t *testing.T) {
	clock := grudgetest.NewFakeClock()
	before := runtime.NumGoroutine()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 100, Clock: clock}, Generations: 2, Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("lazy NewRotator started %d goroutines", n-before)
	}
	k := []byte("k")
	r.Update(k, 5)
	clock.Advance(time.Minute)
	if got := r.Query(k); got != 5 {
		t.Fatalf("after one period Query = %v, want 5 (warm start)", got)
	}
	if got := r.Rotations(); got != 1 {
		t.Fatalf("Rotations() = %d, want 1", got)
	}
	clock.Advance(time.Minute)
	if got := r.Query(k); got != 0 {
		t.Fatalf("after two periods without writes Query = %v, want 0", got)
	}
	clock.Advance(5 * time.Minute) // a jump counts every period it spans
	if got := r.Rotations(); got != 7 {
		t.Fatalf("Rotations() = %d, want 7", got)
	}
}

// TestCloseIdempotent: Close stops the goroutine (goleak checks at exit),
// stops the ticker, can be called twice, and operations still work.
func TestCloseIdempotent(t *testing.T) {
	ticker := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Lo: 0, Hi: 1}, Period: time.Second, Ticker: ticker})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if !ticker.Stopped() {
		t.Fatal("Close did not stop the Ticker")
	}
	ticker.Tick() // returns at once after Stop
	r.Update([]byte("k"), 1)
	if r.Rotations() != 0 {
		t.Fatal("rotated after Close")
	}
	goleak.VerifyNone(t)
}

// TestCustomAggregatorAndDecay: any function aggregates and any Decay
// decays (the slow paths).
func TestCustomAggregatorAndDecay(t *testing.T) {
	clock := grudgetest.NewFakeClock()
	sum := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s
	}
	s, err := grudge.New(grudge.Config{Levels: 3, Lo: 0, Hi: 100, Aggregator: sum, Decay: halfPerSecond{}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 8)
	if got := s.Query(k); got != 24 {
		t.Fatalf("sum over 3 levels = %v, want 24", got)
	}
	clock.Advance(time.Second)
	if got := s.Query(k); !near(got, 12) {
		t.Fatalf("after a half-life Query = %v, want 12", got)
	}
	// The sum is 12: 12+1 <= 15.5 admits (each level 4 -> 5), then
	// 15+1 > 15.5 denies.
	if !s.TryUpdate(k, 1, 15.5) || s.TryUpdate(k, 1, 15.5) {
		t.Fatal("TryUpdate does not decide on the custom aggregate")
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 2, Lo: 0, Hi: 100, Aggregator: sum, Clock: clock}, Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.UpdateAndQuery(k, 3); got != 6 || r.QueryDetailed(k).Aggregate != 6 {
		t.Fatalf("rotator with a custom aggregator: %v, want 6", got)
	}
}

// halfPerSecond is a user's own Decay: it halves a score every second.
type halfPerSecond struct{}

func (halfPerSecond) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 {
		return score
	}
	return score * math.Exp2(-float64(dtMillis)/1000)
}

// wallClock is a user's Clock with only Now, as grudge defines it.
type wallClock struct{ t atomic.Int64 }

func (c *wallClock) Now() time.Time { return time.UnixMilli(c.t.Load()) }

// TestForeignClockAndHasher: a Clock with only Now and a HasherFactory of
// the user's own work.
func TestForeignClockAndHasher(t *testing.T) {
	clock := &wallClock{}
	clock.t.Store(1_000_000)
	var calls atomic.Int64
	fnv := func(seed uint64) grudge.Hasher { return fnvHasher{seed, &calls} }
	s, err := grudge.New(grudge.Config{Lo: 0, Hi: 100, Decay: grudge.Linear(1), Hasher: fnv, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 10)
	clock.t.Add(3000)
	if got := s.Query(k); !near(got, 7) {
		t.Fatalf("after 3s of Linear(1) Query = %v, want 7", got)
	}
	if calls.Load() == 0 {
		t.Fatal("the user's Hasher was not used")
	}
	for _, h := range []grudge.HasherFactory{grudge.SipHash(), grudge.Murmur3()} {
		a, b := h(1).Hash64(k), h(2).Hash64(k)
		if a == b {
			t.Fatalf("seeds 1 and 2 hash %q alike", k)
		}
	}
}

type fnvHasher struct {
	seed  uint64
	calls *atomic.Int64
}

func (h fnvHasher) Hash64(key []byte) uint64 {
	h.calls.Add(1)
	x := 14695981039346656037 ^ h.seed
	for _, c := range key {
		x = (x ^ uint64(c)) * 1099511628211
	}
	x ^= x >> 33 // mix the high bits down and the low bits up
	x *= 0xff51afd7ed558ccd
	return x ^ x>>33
}

// TestConfigErrors: invalid configs yield the core's errors unchanged.
func TestConfigErrors(t *testing.T) {
	for _, c := range []grudge.Config{{Lo: 1, Hi: 2}, {Lo: 0, Hi: 0}, {Lo: math.NaN(), Hi: 1}, {Levels: 9, Hi: 1}, {Hi: 1, Decay: grudge.Exponential(-1)}} {
		_, err := grudge.New(c)
		var ce *grudge.ConfigError
		if err == nil || !strings.HasPrefix(err.Error(), "sketch: ") || !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("New(%+v) error = %v, want a sketch: *ConfigError matching ErrInvalidConfig", c, err)
		}
	}
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}}); !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Errorf("NewRotator without Period or Ticker: %v, want ErrInvalidConfig", err)
	}
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Generations: 1, Period: time.Second}); !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Errorf("NewRotator with 1 generation: %v, want ErrInvalidConfig", err)
	}
}

// TestSuggestLevels sizes from the false-positive formula and refuses
// degenerate inputs.
func TestSuggestLevels(t *testing.T) {
	if l := suggested(grudge.SuggestLevels(1000, 100_000, 1e-8)); l != 4 {
		t.Errorf("SuggestLevels(1000, 100000, 1e-8) = %d, want 4", l)
	}
	for _, in := range []struct {
		h, m uint32
		p    float64
	}{{0, 100, 0.01}, {10, 0, 0.01}, {10, 100, 0}, {10, 100, 1}, {10, 100, math.NaN()}, {10, 100, -1}} {
		l, err := grudge.SuggestLevels(in.h, in.m, in.p)
		if err == nil || !strings.HasPrefix(err.Error(), "grudge: ") {
			t.Errorf("SuggestLevelsChecked(%d, %d, %v) = %d, %v; want an error", in.h, in.m, in.p, l, err)
		}
		if l := suggested(grudge.SuggestLevels(in.h, in.m, in.p)); l != 0 {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, want 0", in.h, in.m, in.p, l)
		}
	}
}

// TestDeps: the root package pulls in only what the sketch needs plus
// murmur3: no plotting, benchmark or test-only modules in a user's build.
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("go not on PATH in CI")
		}
		t.Skip("go not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := []string{"github.com/lfgrudge/grudge", "github.com/spaolacci/murmur3", "github.com/zeebo/xxh3",
		"github.com/klauspost/cpuid/v2", "github.com/dchest/siphash", "golang.org/x/sys/cpu"}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if !strings.Contains(first, ".") {
			continue // standard library
		}
		ok := false
		for _, a := range allowed {
			if p == a || strings.HasPrefix(p, a+"/") {
				ok = true
			}
		}
		if !ok || strings.Contains(p, "/bench") || strings.HasSuffix(p, "test") {
			t.Errorf("unexpected dependency %s", p)
		}
	}
}
