package atom_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/internal/atom"
)

var (
	negZero          = float32(math.Copysign(0, -1))
	smallestSubnorm  = math.Float32frombits(0x00000001)
	largestSubnorm   = math.Float32frombits(0x007fffff)
	smallestNormal32 = math.Float32frombits(0x00800000)
	inf32            = float32(math.Inf(1))
)

func TestPackRoundTrip(t *testing.T) {
	scores := []float32{
		0, negZero, smallestSubnorm, -smallestSubnorm, largestSubnorm, -largestSubnorm,
		smallestNormal32, math.MaxFloat32, -math.MaxFloat32, 1, -1, 0.1,
	}
	stamps := []uint32{0, 1, 1<<31 - 1, 1 << 31, 1<<32 - 1}
	for _, s := range scores {
		for _, st := range stamps {
			w := atom.Pack(s, st)
			if got := w.Score(); math.Float32bits(got) != math.Float32bits(s) {
				t.Errorf("Pack(%v, %d).Score() = %v (bits %#08x), want bits %#08x",
					s, st, got, math.Float32bits(got), math.Float32bits(s))
			}
			if got := w.Stamp(); got != st {
				t.Errorf("Pack(%v, %d).Stamp() = %d", s, st, got)
			}
			// The documented layout: score bits high, stamp low.
			if want := uint64(math.Float32bits(s))<<32 | uint64(st); uint64(w) != want {
				t.Errorf("Pack(%v, %d) = %#016x, want %#016x", s, st, uint64(w), want)
			}
		}
	}
}

func TestZeroWord(t *testing.T) {
	var w atom.Word
	if s := w.Score(); s != 0 || math.Signbit(float64(s)) || w.Stamp() != 0 {
		t.Fatalf("zero Word = (%v, %d), want (+0, 0)", s, w.Stamp())
	}
}

func TestPackRoundTripRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bits := rapid.Uint32().Draw(t, "bits")
		st := rapid.Uint32().Draw(t, "stamp")
		w := atom.Pack(math.Float32frombits(bits), st)
		if math.Float32bits(w.Score()) != bits || w.Stamp() != st {
			t.Fatalf("Pack(bits %#08x, %d) decodes to (bits %#08x, %d)",
				bits, st, math.Float32bits(w.Score()), w.Stamp())
		}
	})
}

func TestElapsedNewer(t *testing.T) {
	const max = 1<<32 - 1
	tests := []struct {
		name        string
		stamp, now  uint32
		wantElapsed int64
		wantNewer   uint32
	}{
		{"equal", 7, 7, 0, 7},
		{"forward", 7, 10, 3, 10},
		{"backwards", 10, 7, 0, 10},
		{"backwards-one", 1, 0, 0, 1},
		{"wrap-by-one", max, 0, 1, 0},
		{"wrap-small", max - 2, 4, 7, 4},
		{"wrap-backwards", 4, max - 2, 0, 4},
		{"max-positive", 0, 1<<31 - 1, 1<<31 - 1, 1<<31 - 1},
		{"max-positive-wrapped", max - 9, 1<<31 - 11, 1<<31 - 1, 1<<31 - 11},
		{"half-is-zero", 0, 1 << 31, 0, 0},
		{"half-is-zero-wrapped", 1 << 31, 0, 0, 1 << 31},
		{"half-is-zero-offset", 5, 5 + 1<<31, 0, 5},
		{"half-plus-one", 0, 1<<31 + 1, 0, 0},
		{"all-but-one", 0, max, 0, 0},
		{"all-but-one-offset", 9, 8, 0, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := atom.Elapsed(tt.stamp, tt.now); got != tt.wantElapsed {
				t.Errorf("Elapsed(%d, %d) = %d, want %d", tt.stamp, tt.now, got, tt.wantElapsed)
			}
			if got := atom.Newer(tt.stamp, tt.now); got != tt.wantNewer {
				t.Errorf("Newer(%d, %d) = %d, want %d", tt.stamp, tt.now, got, tt.wantNewer)
			}
		})
	}
}

func TestElapsedNewerRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		stamp := rapid.OneOf(
			rapid.Uint32(),
			rapid.Uint32Range(1<<32-100, 1<<32-1),
			rapid.Uint32Range(1<<31-100, 1<<31+100),
		).Draw(t, "stamp")
		d := rapid.OneOf(
			rapid.Uint32(),
			rapid.Uint32Range(0, 100),
			rapid.Uint32Range(1<<31-100, 1<<31+100),
			rapid.Uint32Range(1<<32-100, 1<<32-1),
		).Draw(t, "d") // now - stamp, modulo 2^32
		now := stamp + d
		el, nw := atom.Elapsed(stamp, now), atom.Newer(stamp, now)
		if d > 0 && d < 1<<31 {
			if el != int64(d) || nw != now {
				t.Fatalf("Elapsed/Newer(%d, %d) = %d/%d, want %d/%d", stamp, now, el, nw, d, now)
			}
			return
		}
		if el != 0 || nw != stamp {
			t.Fatalf("Elapsed/Newer(%d, %d) = %d/%d, want 0/%d", stamp, now, el, nw, stamp)
		}
	})
}

// checkRoundUp asserts RoundUp's contract for one input.
func checkRoundUp(t rapid.TB, x float64) {
	t.Helper()
	r := atom.RoundUp(x)
	switch {
	case math.IsNaN(x):
		if !math.IsNaN(float64(r)) {
			t.Fatalf("RoundUp(NaN) = %v, want NaN", r)
		}
		return
	case x > math.MaxFloat32:
		if r != math.MaxFloat32 {
			t.Fatalf("RoundUp(%v) = %v, want MaxFloat32 (saturated)", x, r)
		}
		return
	case x < -math.MaxFloat32:
		if r != -math.MaxFloat32 {
			t.Fatalf("RoundUp(%v) = %v, want -MaxFloat32 (saturated)", x, r)
		}
		return
	}
	if math.IsInf(float64(r), 0) || math.IsNaN(float64(r)) {
		t.Fatalf("RoundUp(%v) = %v, want finite", x, r)
	}
	if !(float64(r) >= x) {
		t.Fatalf("RoundUp(%v) = %v (%v), below x", x, r, float64(r))
	}
	// Smallest such float32: the float32 just below r is below x.
	if prev := math.Nextafter32(r, -inf32); !(float64(prev) < x) {
		t.Fatalf("RoundUp(%v) = %v, but the smaller float32 %v is also >= x", x, r, prev)
	}
	// Exact, sign of zero included, when x is a float32.
	if f := float32(x); float64(f) == x && math.Float32bits(r) != math.Float32bits(f) {
		t.Fatalf("RoundUp(%v) = %v (bits %#08x), want x exactly (bits %#08x)",
			x, r, math.Float32bits(r), math.Float32bits(f))
	}
}

func TestRoundUpSpecial(t *testing.T) {
	tests := []struct {
		x    float64
		want float32
	}{
		{0, 0},
		{math.Copysign(0, -1), negZero},
		{1, 1},
		{-1, -1},
		{math.Inf(1), math.MaxFloat32},
		{math.Inf(-1), -math.MaxFloat32},
		{math.MaxFloat64, math.MaxFloat32},
		{-math.MaxFloat64, -math.MaxFloat32},
		{math.MaxFloat32, math.MaxFloat32},
		{-math.MaxFloat32, -math.MaxFloat32},
		{math.Nextafter(math.MaxFloat32, math.Inf(1)), math.MaxFloat32},
		{math.Nextafter(-math.MaxFloat32, math.Inf(-1)), -math.MaxFloat32},
		{math.Nextafter(-math.MaxFloat32, 0), math.Nextafter32(-math.MaxFloat32, 0)},
		{math.Nextafter(math.MaxFloat32, 0), math.MaxFloat32},
		{5e-324, smallestSubnorm},
		{-5e-324, negZero},
		{float64(smallestSubnorm) / 2, smallestSubnorm},       // a tie rounds to 0 under nearest-even
		{-float64(smallestSubnorm) / 2, negZero},              // likewise
		{float64(smallestSubnorm) * 1.5, 2 * smallestSubnorm}, // a tie rounds to 2 ulps
		{float64(largestSubnorm), largestSubnorm},
		{math.Nextafter(float64(largestSubnorm), 1), smallestNormal32},
		{math.Nextafter(float64(largestSubnorm), 0), largestSubnorm},
		{0.1, float32(0.1)},                      // float32(0.1) is above 0.1
		{0.7, math.Nextafter32(float32(0.7), 1)}, // float32(0.7) is below 0.7
		{1 + 1e-12, math.Nextafter32(1, 2)},
		{-1 - 1e-12, -1},
	}
	for _, tt := range tests {
		if got := atom.RoundUp(tt.x); math.Float32bits(got) != math.Float32bits(tt.want) {
			t.Errorf("RoundUp(%v) = %v (bits %#08x), want %v (bits %#08x)",
				tt.x, got, math.Float32bits(got), tt.want, math.Float32bits(tt.want))
		}
		checkRoundUp(t, tt.x)
	}
	if got := atom.RoundUp(math.NaN()); !math.IsNaN(float64(got)) {
		t.Errorf("RoundUp(NaN) = %v, want NaN", got)
	}
}

// float32Bits draws any float32 bit pattern but NaN: subnormals, zeros of
// both signs and the infinities included.
func float32Bits() *rapid.Generator[float32] {
	return rapid.Custom(func(t *rapid.T) float32 {
		f := math.Float32frombits(rapid.Uint32().Draw(t, "bits"))
		if f != f {
			return inf32
		}
		return f
	})
}

// nearFloat32 draws float64 values at and next to float32 values: the
// float32 itself, its float64 neighbours, the midpoints to its float32
// neighbours and their neighbours (ties are where round-to-nearest goes
// down and RoundUp must correct it).
func nearFloat32() *rapid.Generator[float64] {
	return rapid.Custom(func(t *rapid.T) float64 {
		f := rapid.OneOf(float32Bits(), rapid.Float32()).Draw(t, "f")
		x := float64(f)
		up := float64(math.Nextafter32(f, inf32))
		down := float64(math.Nextafter32(f, -inf32))
		mid := func(a, b float64) float64 { return a + (b-a)/2 }
		cands := []float64{
			x,
			math.Nextafter(x, math.Inf(1)),
			math.Nextafter(x, math.Inf(-1)),
			mid(x, up),
			mid(down, x),
			math.Nextafter(mid(x, up), math.Inf(1)),
			math.Nextafter(mid(x, up), math.Inf(-1)),
			math.Nextafter(mid(down, x), math.Inf(-1)),
		}
		return cands[rapid.IntRange(0, len(cands)-1).Draw(t, "which")]
	})
}

func TestRoundUpRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := rapid.OneOf(
			nearFloat32(),
			rapid.Float64(),
			rapid.Float64Range(-1e-38, 1e-38), // float32 subnormals and the gap below
			rapid.Float64Range(-1e39, 1e39),   // past the float32 range
			rapid.SampledFrom([]float64{math.Inf(1), math.Inf(-1)}),
		).Draw(t, "x")
		checkRoundUp(t, x)
	})
}

func FuzzRoundUp(f *testing.F) {
	for _, x := range []float64{
		0, math.Copysign(0, -1), 1, -1, 0.1, -0.1, 1 + 1e-12, -1 - 1e-12,
		5e-324, -5e-324, float64(smallestSubnorm), float64(smallestSubnorm) / 2,
		float64(largestSubnorm), math.Nextafter(float64(largestSubnorm), 1),
		math.MaxFloat32, -math.MaxFloat32,
		math.Nextafter(math.MaxFloat32, math.Inf(1)), math.Nextafter(-math.MaxFloat32, math.Inf(-1)),
		math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(),
	} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		checkRoundUp(t, x)
	})
}
