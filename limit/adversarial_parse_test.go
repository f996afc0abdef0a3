package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// FuzzLimitMarshalText: every Limit New accepts (a float64 in (0, 1e22]
// that New takes at burst 1, so not below about 2.9e-36, and Inf)
// marshals to a text ParseLimit reads back bit for bit; every other
// float64 still marshals, and ParseLimit refuses its text.
func FuzzLimitMarshalText(f *testing.F) {
	for _, v := range []float64{1, 0.1, 1.0 / 3, 1e22, 5e-324, math.Nextafter(1e22, 0), 1e-300, 142.85714285714286, 0, -1, math.NaN(), math.Inf(1), math.MaxFloat64, math.Nextafter(1e22, 2e22)} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		l := limit.Limit(v)
		b, err := l.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", v, err)
		}
		back, err := limit.ParseLimit(string(b))
		valid := l == limit.Inf || math.IsInf(v, 1) || v > 0 && v <= 1e22 && newTakes(l)
		switch {
		case valid && l != limit.Inf && !math.IsInf(v, 1) && (err != nil || math.Float64bits(float64(back)) != bits):
			t.Fatalf("%v (%#x) -> %q -> %v, %v", v, bits, b, float64(back), err)
		case valid && (l == limit.Inf || math.IsInf(v, 1)) && (err != nil || back != limit.Inf):
			t.Fatalf("%v -> %q -> %v, %v", v, b, float64(back), err)
		case !valid && err == nil:
			// Since stop 64 (audit 130) ParseLimit refuses the rates New
			// refuses whatever the burst: below about 2.9e-36 per second too.
			t.Fatalf("%v is not a Limit New accepts, yet %q parses to %v", v, b, float64(back))
		}
	})
}

// newTakes reports whether New takes l (in (0, 1e22]) at burst 1 and
// MaxDebt 1, the least debt it holds (a rate it refuses there it refuses
// at every burst). Rates from 1e-30 on are far above the floor (about
// 2.94e-36) and those below 1e-37 far below it: only the band between
// is built (New costs about 0.4 ms; TestAudit130ParseLimitRateFloorMatchesNew
// checks the floor itself).
func newTakes(l limit.Limit) bool {
	switch {
	case l >= 1e-30:
		return true
	case l < 1e-37:
		return false
	}
	_, err := limit.New(l, 1, limit.WithMaxDebt(1), limit.WithSize(1, 1))
	return err == nil
}
