package core

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dchest/siphash"
	"github.com/zeebo/xxh3"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
)

// cfgtDecay is a custom law for Normalize tests: it drains or not, and may
// fail validation.
type cfgtDecay struct {
	drains bool
	err    error
}

func (d cfgtDecay) Apply(s float64, dt int64) float64 {
	if d.drains && dt > 0 {
		return s / 2
	}
	return s
}

type cfgtValidatingDecay struct{ cfgtDecay }

func (d cfgtValidatingDecay) Validate() error { return d.err }

type cfgtClock struct{}

func (cfgtClock) NowMillis() int64 { return 0 }

func TestNormalizeDefaults(t *testing.T) {
	in := Config{Hi: 1}
	got, err := in.Normalize()
	if err != nil {
		t.Fatalf("Normalize(%+v): %v", in, err)
	}
	if got.Levels != 4 {
		t.Errorf("Levels = %d, want 4", got.Levels)
	}
	if got.CellsPerLevel != 100_000 {
		t.Errorf("CellsPerLevel = %d, want 100000", got.CellsPerLevel)
	}
	if k, _ := law.Params(got.Decay); got.Decay == nil || k != law.KindNone {
		t.Errorf("Decay = %v, want decay.None()", got.Decay)
	}
	if got.Aggregator != Min {
		t.Errorf("Aggregator = %v, want Min", got.Aggregator)
	}
	if got.Hasher == nil {
		t.Fatal("Hasher = nil, want XXH3()")
	}
	if h, want := got.Hasher(got.Seed).Sum64([]byte("x")), xxh3.HashSeed([]byte("x"), 0); h != want {
		t.Errorf("default Hasher gives %#x, want XXH3 %#x", h, want)
	}
	if got.Clock != nil {
		t.Errorf("Clock = %v, want nil kept nil", got.Clock)
	}
	if got.Lo != 0 || got.Hi != 1 || got.Seed != 0 {
		t.Errorf("Lo, Hi, Seed = %v, %v, %v; want 0, 1, 0", got.Lo, got.Hi, got.Seed)
	}
	if in.Levels != 0 || in.Hasher != nil || in.Decay != nil {
		t.Errorf("Normalize modified its receiver: %+v", in)
	}

	// Set fields are kept, and Normalize is idempotent.
	clk := cfgtClock{}
	set := Config{Levels: 8, CellsPerLevel: MaxCellsPerLevel, Decay: decay.Linear(2), Lo: -3, Hi: 9,
		Aggregator: Mean, Hasher: SipHash(), Seed: 77, Clock: clk, MaxBytes: 1 << 36}
	got, err = set.Normalize()
	if err != nil {
		t.Fatalf("Normalize(%+v): %v", set, err)
	}
	again, err := got.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{got, again} {
		if c.Levels != 8 || c.CellsPerLevel != MaxCellsPerLevel || c.Lo != -3 || c.Hi != 9 ||
			c.Aggregator != Mean || c.Seed != 77 || c.Clock != clk {
			t.Errorf("set fields changed: %+v", c)
		}
		if k, r := law.Params(c.Decay); k != law.KindLinear || r != 2 {
			t.Errorf("Decay = %v, want Linear(2)", c.Decay)
		}
		if c.Hasher(77).Sum64([]byte("x")) != SipHash()(77).Sum64([]byte("x")) {
			t.Error("Hasher is not the SipHash factory that was set")
		}
	}
}

func TestNormalizeRejects(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error: the field and the value
	}{
		{"Levels=9", Config{Levels: 9, Hi: 1}, []string{"Levels", "9"}},
		{"Levels=1000", Config{Levels: 1000, Hi: 1}, []string{"Levels", "1000"}},
		{"CellsPerLevel=2^30+1", Config{CellsPerLevel: 1<<30 + 1, Hi: 1}, []string{"CellsPerLevel", "1073741825"}},
		{"CellsPerLevel=MaxUint32", Config{CellsPerLevel: math.MaxUint32, Hi: 1}, []string{"CellsPerLevel", "4294967295"}},
		{"Lo=NaN", Config{Lo: nan, Hi: 1}, []string{"Lo", "NaN"}},
		{"Hi=NaN", Config{Hi: nan}, []string{"Hi", "NaN"}},
		{"Lo>0", Config{Lo: 0.5, Hi: 1}, []string{"Lo", "0.5"}},
		{"Hi<0", Config{Lo: -2, Hi: -0.25}, []string{"Hi", "-0.25"}},
		{"Lo==Hi==0", Config{}, []string{"Lo", "Hi", "0"}},
		{"Hi=+Inf/None", Config{Hi: inf, Decay: decay.None()}, []string{"Hi", "+Inf", "none"}},
		{"Hi=+Inf/nil", Config{Hi: inf}, []string{"Hi", "+Inf"}},
		{"Hi=+Inf/custom-not-draining", Config{Hi: inf, Decay: cfgtDecay{}}, []string{"Hi", "+Inf", "custom"}},
		{"Lo=-Inf/None", Config{Lo: -inf, Hi: 1, Decay: decay.None()}, []string{"Lo", "-Inf", "none"}},
		{"Lo=-Inf/nil", Config{Lo: -inf, Hi: 0}, []string{"Lo", "-Inf"}},
		{"Aggregator=7", Config{Hi: 1, Aggregator: 7}, []string{"Aggregator", "7"}},
		{"Aggregator=3", Config{Hi: 1, Aggregator: 3}, []string{"Aggregator", "3"}},
		{"Exponential(0)", Config{Hi: 1, Decay: decay.Exponential(0)}, []string{"Decay", "Exponential", "got 0"}},
		{"Exponential(NaN)", Config{Hi: 1, Decay: decay.Exponential(nan)}, []string{"Decay", "Exponential", "NaN"}},
		{"Exponential(-1)", Config{Hi: 1, Decay: decay.Exponential(-1)}, []string{"Decay", "Exponential", "-1"}},
		{"Exponential(+Inf)", Config{Hi: 1, Decay: decay.Exponential(inf)}, []string{"Decay", "Exponential", "+Inf"}},
		{"Linear(-1)", Config{Hi: 1, Decay: decay.Linear(-1)}, []string{"Decay", "Linear", "-1"}},
		{"Linear(+Inf)", Config{Hi: 1, Decay: decay.Linear(inf)}, []string{"Decay", "Linear", "+Inf"}},
		{"Linear(0)", Config{Hi: 1, Decay: decay.Linear(0)}, []string{"Decay", "Linear", "got 0"}},
		{"Linear(NaN)", Config{Hi: 1, Decay: decay.Linear(nan)}, []string{"Decay", "Linear", "NaN"}},
		{"custom Validator", Config{Hi: 1, Decay: cfgtValidatingDecay{cfgtDecay{err: errors.New("bad knob 42")}}}, []string{"Decay", "bad knob 42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.Normalize()
			if err == nil {
				t.Fatalf("Normalize(%+v) = nil error", tt.cfg)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "sketch: ") {
				t.Errorf("error %q lacks the \"sketch: \" prefix", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestNormalizeAccepts(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"Hi=+Inf/Linear", Config{Hi: inf, Decay: decay.Linear(1)}},
		{"Hi=+Inf/Exponential", Config{Hi: inf, Decay: decay.Exponential(0.1)}},
		{"Lo=-Inf/Linear", Config{Lo: -inf, Hi: 0, Decay: decay.Linear(1)}},
		{"Lo=-Inf,Hi=+Inf/Exponential", Config{Lo: -inf, Hi: inf, Decay: decay.Exponential(1)}},
		{"Hi=+Inf/custom-draining", Config{Hi: inf, Decay: cfgtDecay{drains: true}}},
		{"Lo<0=Hi", Config{Lo: -1, Hi: 0}},
		{"tiny Hi", Config{Hi: math.SmallestNonzeroFloat64}},
		{"Levels=1,M=1", Config{Levels: 1, CellsPerLevel: 1, Hi: 1}},
		{"Levels=8,M=2^30 with MaxBytes", Config{Levels: MaxLevels, CellsPerLevel: MaxCellsPerLevel, Hi: 1, MaxBytes: 1 << 36}},
		{"Levels=8,M=2^26 at the default cap", Config{Levels: MaxLevels, CellsPerLevel: 1 << 26, Hi: 1}},
		{"Hi=MaxFloat32", Config{Hi: math.MaxFloat32}},
		{"Max,Mean", Config{Hi: 1, Aggregator: Mean}},
		{"custom Validator ok", Config{Hi: 1, Decay: cfgtValidatingDecay{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.cfg.Normalize(); err != nil {
				t.Fatalf("Normalize(%+v): %v", tt.cfg, err)
			}
		})
	}
}

func TestFalsePositiveRateValues(t *testing.T) {
	tests := []struct {
		levels, m uint32
		hot       uint64
		want      float64 // by hand: (1 - (1 - 1/m)^hot)^levels
	}{
		{1, 2, 1, 0.5},
		{2, 2, 1, 0.25},
		{3, 2, 2, 0.421875},       // (1 - 1/4)^3
		{1, 10, 10, 0.6513215599}, // 1 - 0.9^10
		{1, 1, 5, 1},              // one cell: always shared
		{4, 0, 10, 1},             // no cells
		{4, 100_000, 0, 0},        // no hot keys
		{4, 100_000, 1000, 9.802345167910319e-09}, // exact to 16 digits (50-digit decimal arithmetic)
		{8, 100_000, 100_000, 0.025492324198224293},
	}
	for _, tt := range tests {
		got := FalsePositiveRate(tt.levels, tt.m, tt.hot)
		if got != tt.want && !(math.Abs(got-tt.want) <= 1e-12*tt.want) {
			t.Errorf("FalsePositiveRate(%d, %d, %d) = %v, want %v", tt.levels, tt.m, tt.hot, got, tt.want)
		}
	}
}

func TestSuggestLevelsValues(t *testing.T) {
	// For m = 100k and 1000 hot keys the rate per L is about
	// 9.95e-3, 9.90e-5, 9.85e-7, 9.80e-9, 9.75e-11, ...
	tests := []struct {
		m      uint32
		hot    uint64
		target float64
		want   uint32
	}{
		{100_000, 1000, 1e-6, 3},
		{100_000, 1000, 1e-8, 4},
		{100_000, 1000, 1e-9, 5},
		{0, 1000, 1e-6, 3}, // m = 0 means DefaultCellsPerLevel
		{100_000, 1000, 1, 1},
		{100_000, 1000, 0.01, 1},
		{100_000, 0, 0, 1},            // no hot keys: rate 0 at L = 1
		{100_000, 1000, 0, MaxLevels}, // unreachable: MaxLevels
		{2, 1000, 0.5, MaxLevels},
		{100_000, 100_000, 0.05, 7}, // 0.0403 at L = 7, 0.0638 at L = 6
	}
	for _, tt := range tests {
		if got := SuggestLevels(tt.m, tt.hot, tt.target); got != tt.want {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, want %d", tt.m, tt.hot, tt.target, got, tt.want)
		}
	}
}

// cfgtSplitmix is an independent SplitMix64 (Vigna) for test inputs.
func cfgtSplitmix(state *uint64) uint64 {
	*state += 0x9E3779B97F4A7C15
	z := *state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func TestIndexRangeAndDeterminism(t *testing.T) {
	st := uint64(1)
	for _, m := range []uint32{1, 2, 3, 97, 1000, 100_000, MaxCellsPerLevel} {
		for range 10_000 {
			h := cfgtSplitmix(&st)
			for l := range uint32(MaxLevels) {
				i := Index(h, l, m)
				if i >= m {
					t.Fatalf("Index(%#x, %d, %d) = %d, out of range", h, l, m, i)
				}
				if j := Index(h, l, m); j != i {
					t.Fatalf("Index(%#x, %d, %d) = %d then %d", h, l, m, i, j)
				}
			}
		}
	}
	// Extremes of h.
	for _, h := range []uint64{0, math.MaxUint64, 1 << 63, math.MaxUint32} {
		for l := range uint32(MaxLevels) {
			if i := Index(h, l, 1000); i >= 1000 {
				t.Fatalf("Index(%#x, %d, 1000) = %d", h, l, i)
			}
		}
	}
	// Hand-computed: h1 = 0x80000000, h2 = 1|1 = 1; level 0 is g = 2^31,
	// half way through the row.
	if got := Index(1<<32|1<<31, 0, 1000); got != 500 {
		t.Errorf("Index(h1=2^31, level 0, 1000) = %d, want 500", got)
	}
	// level 2: g = 2^31 + 2*0x40000001 = 0x100000002 mod 2^32 = 2 -> 0.
	if got := Index(0x40000000<<32|1<<31, 2, 1000); got != 0 {
		t.Errorf("Index(h1=2^31, h2=0x40000001, level 2, 1000) = %d, want 0", got)
	}
}

// TestIndexLevelsDiffer: for a good hash the cells of two levels coincide
// (same index) about as rarely as chance, 1/m, plus the 1/m chance that
// h2 < 2^32/m makes the step shorter than one cell.
func TestIndexLevelsDiffer(t *testing.T) {
	const (
		n = 100_000
		m = 1000
	)
	st := uint64(7)
	same := make([]int, MaxLevels)
	for range n {
		h := cfgtSplitmix(&st)
		i0 := Index(h, 0, m)
		for l := 1; l < MaxLevels; l++ {
			if Index(h, uint32(l), m) == i0 {
				same[l]++
			}
		}
	}
	for l := 1; l < MaxLevels; l++ {
		if same[l] > 4*n/m {
			t.Errorf("level %d shares level 0's index for %d of %d hashes; want about %d", l, same[l], n, 2*n/m)
		}
	}
}

// TestIndexChiSquare: 1e6 hashes into M = 1000 cells at every level.
// Chi-square with 999 degrees of freedom has mean 999 and sd ~44.7; the
// threshold 1300 is generous (p < 1e-9 for a uniform index).
func TestIndexChiSquare(t *testing.T) {
	const (
		n = 1_000_000
		m = 1000
	)
	hs := make([]uint64, n)
	st := uint64(0x5eed)
	for i := range hs {
		hs[i] = cfgtSplitmix(&st)
	}
	counts := make([]int, m)
	for l := range uint32(MaxLevels) {
		clear(counts)
		for _, h := range hs {
			counts[Index(h, l, m)]++
		}
		exp := float64(n) / m
		chi := 0.0
		for _, c := range counts {
			d := float64(c) - exp
			chi += d * d / exp
		}
		if chi > 1300 {
			t.Errorf("level %d: chi-square %.1f over %d cells, want < 1300 (mean 999)", l, chi, m)
		}
	}
}

// Known-value vectors, computed once with xxh3.HashSeed and siphash.Hash
// directly (SipHash keyed by two splitmix64 outputs of the seed).
var cfgtHashKeys = func() []string {
	long := make([]byte, 300)
	for i := range long {
		long[i] = byte(i * 7)
	}
	return []string{"", "a", "grudge", "the quick brown fox jumps over the lazy dog", string(long)}
}()

var cfgtHashVectors = []struct {
	seed     uint64
	k0, k1   uint64    // splitmix64 expansion of seed
	xxh, sip [5]uint64 // per cfgtHashKeys entry
}{
	{0, 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
		[5]uint64{0x2d06800538d394c2, 0xe6c632b61e964e1f, 0x4a9cc9711b6e1b7d, 0xe4541a9cacf545aa, 0xe2558afb5598da2a},
		[5]uint64{0x352e4b21680c7c48, 0x86718f65b0eebdbc, 0x965a9a8efb3aa6f0, 0xcde8d637ed76c718, 0x2dc9a061a14b4a35}},
	{1, 0x910a2dec89025cc1, 0xbeeb8da1658eec67,
		[5]uint64{0x4dc5b0cc826f6703, 0xd2f6d0996f37a720, 0x271b682f039251e3, 0xc64714c8bf416cd9, 0xaa835a6ff549c24f},
		[5]uint64{0x97777851427b463c, 0x9934f1fe01f4deb1, 0xe5ea844d2944c4f9, 0x299a8726995b5aae, 0x870c95f6d8b9406c}},
	{0xdeadbeefcafef00d, 0x901d4f652fb472cb, 0xa7ce246440f74527,
		[5]uint64{0x16021bd6a8820670, 0xc266080fcf4ce8fd, 0x629cad65d86d0945, 0x7a13ec85cbc21109, 0x9e67fafa0d8b502e},
		[5]uint64{0xc0b13b19a184f55a, 0x0bc40ae366372e4d, 0x0b47042d66fff8c1, 0x7b31f2df80585121, 0xd3d3f3dc63946984}},
}

func TestHashKnownVectors(t *testing.T) {
	for _, v := range cfgtHashVectors {
		st := v.seed
		if k0, k1 := SplitMix64(&st), SplitMix64(&st); k0 != v.k0 || k1 != v.k1 {
			t.Errorf("seed %#x: splitmix64 expansion %#x, %#x; want %#x, %#x", v.seed, k0, k1, v.k0, v.k1)
		}
		x, s := XXH3()(v.seed), SipHash()(v.seed)
		for i, key := range cfgtHashKeys {
			name := fmt.Sprintf("seed %#x key %d", v.seed, i)
			// The libraries still produce the recorded values...
			if got := xxh3.HashSeed([]byte(key), v.seed); got != v.xxh[i] {
				t.Errorf("%s: xxh3.HashSeed = %#x, recorded %#x", name, got, v.xxh[i])
			}
			if got := siphash.Hash(v.k0, v.k1, []byte(key)); got != v.sip[i] {
				t.Errorf("%s: siphash.Hash = %#x, recorded %#x", name, got, v.sip[i])
			}
			// ...and the factories and their string twins reproduce them.
			if got := x.Sum64([]byte(key)); got != v.xxh[i] {
				t.Errorf("%s: XXH3().Sum64 = %#x, want %#x", name, got, v.xxh[i])
			}
			if got := x.Sum64String(key); got != v.xxh[i] {
				t.Errorf("%s: XXH3().Sum64String = %#x, want %#x", name, got, v.xxh[i])
			}
			if got := s.Sum64([]byte(key)); got != v.sip[i] {
				t.Errorf("%s: SipHash().Sum64 = %#x, want %#x", name, got, v.sip[i])
			}
			if got := s.Sum64String(key); got != v.sip[i] {
				t.Errorf("%s: SipHash().Sum64String = %#x, want %#x", name, got, v.sip[i])
			}
		}
	}
}

func TestHashStringTwinsDoNotAllocate(t *testing.T) {
	key := "some-client-key"
	for name, h := range map[string]Hasher{"XXH3": XXH3()(3), "SipHash": SipHash()(3)} {
		if n := testing.AllocsPerRun(100, func() { _ = h.Sum64String(key) }); n != 0 {
			t.Errorf("%s Sum64String allocates %v", name, n)
		}
	}
}

func TestAggregatorAggregate(t *testing.T) {
	tests := []struct {
		scores         []float64
		min, max, mean float64
	}{
		{[]float64{5}, 5, 5, 5},
		{[]float64{3, 1, 2}, 1, 3, 2},
		{[]float64{-4, 4}, -4, 4, 0},
		{[]float64{7, 7, 7, 7}, 7, 7, 7},
		{[]float64{0, -1, 9, 2, 5, 1, 3, 1}, -1, 9, 2.5},
		{[]float64{1, 2}, 1, 2, 1.5},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			a    Aggregator
			want float64
		}{{Min, tt.min}, {Max, tt.max}, {Mean, tt.mean}} {
			if got := c.a.Aggregate(tt.scores); got != c.want {
				t.Errorf("%v.Aggregate(%v) = %v, want %v", c.a, tt.scores, got, c.want)
			}
		}
	}
	var zero Aggregator
	if zero != Min || zero.Aggregate([]float64{2, 1}) != 1 {
		t.Error("zero Aggregator is not Min")
	}
	scores := []float64{1, 2, 3, 4}
	for _, a := range []Aggregator{Min, Max, Mean} {
		if n := testing.AllocsPerRun(100, func() { _ = a.Aggregate(scores) }); n != 0 {
			t.Errorf("%v.Aggregate allocates %v", a, n)
		}
	}
}

func TestAggregatorString(t *testing.T) {
	for a, want := range map[Aggregator]string{Min: "Min", Max: "Max", Mean: "Mean", 7: "Aggregator(7)"} {
		if got := a.String(); got != want {
			t.Errorf("Aggregator(%d).String() = %q, want %q", uint8(a), got, want)
		}
	}
}

// TestRandomSeed: seeds come from crypto/rand, so two draws differ (a
// repeat has probability 2^-64).
func TestRandomSeed(t *testing.T) {
	if a, b := RandomSeed(), RandomSeed(); a == b {
		t.Fatalf("two RandomSeed draws are equal: %#x", a)
	}
}
