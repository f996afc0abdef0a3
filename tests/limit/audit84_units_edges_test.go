package limit_test

// Audit 84 (units): the boundaries of the exactness predicate and of the
// Buckets engine, named in limit/doc.go ("Engines", "Exactness"), each
// side of each edge, against the oracle of audit84_units_oracle_test.go.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

func audit84unitsEdgeCfgs() []audit84unitsCfg {
	A, C, B := limit.Auto, limit.CountMin, limit.Buckets
	f := audit84unitsFrac
	every := func(name string, d time.Duration, burst int, maxDebt float64, eng limit.Engine) audit84unitsCfg {
		r := new(big.Rat).SetFrac64(int64(time.Second), int64(d))
		return audit84unitsCfg{name: name, lim: limit.Every(d), p: r.Num().Int64(), q: r.Denom().Int64(), burst: burst, maxDebt: maxDebt, eng: eng}
	}
	return []audit84unitsCfg{
		// The count-min's documented examples: 2^24 units at MaxDebt 2 x burst.
		f("1000/h-2330", 1000, 3600, 2330, 0, A, 0),
		f("1000/h-2331", 1000, 3600, 2331, 0, A, 0),
		f("1000/h-2331-rc", 1000, 3600, 2331, 0, A, 3),
		f("1/min-139", 1, 60, 139, 0, A, 0),
		f("1/min-140", 1, 60, 140, 0, A, 0),
		f("1/min-140-rc", 1, 60, 140, 0, A, 1),
		f("10/s-83886", 10, 1, 83886, 0, A, 0),
		f("10/s-83887", 10, 1, 83887, 0, A, 0),
		// WithMaxDebt at and around 2^24 units.
		f("10/s-md167772.16", 10, 1, 10, 167772.16, A, 0),
		f("10/s-md167772.17", 10, 1, 10, 167772.17, A, 0),
		f("10/s-md167773-rc", 10, 1, 10, 167773, A, 7),
		f("1000/h-md4660.33", 1000, 3600, 50, 4660.33, A, 0),
		f("1000/h-md4660.34", 1000, 3600, 50, 4660.34, A, 2),
		f("1000/h-md4661-odd", 1000, 3600, 50, 4661, A, 5),
		// 3/7 per second: token 7000/3 ms, c = 7000, k = 3.
		f("3/7-4", 3, 7, 4, 0, A, 0),
		f("3/7-5", 3, 7, 5, 0, A, 0),
		f("3/7-1198", 3, 7, 1198, 0, A, 0),
		f("3/7-1199", 3, 7, 1199, 0, A, 0),
		// Every(7ms): Buckets up to burst 4388, count-min exact to 1198372.
		every("every7ms-4388", 7*time.Millisecond, 4388, 0, A),
		every("every7ms-4389", 7*time.Millisecond, 4389, 0, A),
		every("every7ms-4389-cm", 7*time.Millisecond, 4389, 0, C),
		every("every7ms-md2396745", 7*time.Millisecond, 100, 2396745, A),
		every("every7ms-md2396746", 7*time.Millisecond, 100, 2396746, A),
		// Every(1.5 ms): 2000/3 per second, 3 ticks of 1/2 ms a token.
		every("every1.5ms-10239", 1500*time.Microsecond, 10239, 0, A),
		every("every1.5ms-10240", 1500*time.Microsecond, 10240, 0, A),
		every("every1.5ms-md20479.33", 1500*time.Microsecond, 100, 20479.33, A),
		every("every1.5ms-md20479.34", 1500*time.Microsecond, 100, 20479.34, A),
		// Every(3s) = 1/3 per second; and 1.0/3 as a float.
		every("every3s-10", 3*time.Second, 10, 0, A),
		every("every3s-11", 3*time.Second, 11, 0, A),
		every("every3s-2796", 3*time.Second, 2796, 0, A),
		every("every3s-2797", 3*time.Second, 2797, 0, A),
		{name: "1.0/3-20", lim: limit.Limit(1.0 / 3), p: 1, q: 3, burst: 20},
		// 1e-3 and 5e-4 (the doc's 2,000,128 units).
		f("1e-3-8", 1, 1000, 8, 0, A, 0),
		f("1e-3-9", 1, 1000, 9, 0, A, 0),
		f("1e-3-1000", 1, 1000, 1000, 0, A, 0),
		f("5e-4-4", 1, 2000, 4, 0, A, 0),
		f("5e-4-5", 1, 2000, 5, 0, A, 0),
		f("5e-4-1000", 1, 2000, 1000, 0, A, 0),
		f("5e-4-1000-rc", 1, 2000, 1000, 0, A, 10),
		// Not short fractions: the float itself.
		{name: "pi-10", lim: limit.Limit(math.Pi), burst: 10},
		{name: "pi-1000", lim: limit.Limit(math.Pi), burst: 1000},
		{name: "pi-40000", lim: limit.Limit(math.Pi), burst: 40000, rc: 1},
		{name: "e/1000-30", lim: limit.Limit(math.E / 1000), burst: 30},
		{name: "0.7071-md70000", lim: limit.Limit(math.Sqrt2 / 2), burst: 50, maxDebt: 70000},
		// The Buckets engine's edges: 61,438 ticks, 16,384 ticks a ms, 65,534.
		f("10/s-307", 10, 1, 307, 0, A, 0),
		f("10/s-308", 10, 1, 308, 0, A, 0),
		f("10/s-md614.38", 10, 1, 20, 614.38, A, 0),
		f("10/s-md614.39", 10, 1, 20, 614.39, A, 0),
		f("10/s-20", 10, 1, 20, 0, A, 0),
		f("1000/s-1000", 1000, 1, 1000, 0, A, 0),
		f("1000/s-30719", 1000, 1, 30719, 0, A, 0),
		f("1000/s-30720", 1000, 1, 30720, 0, A, 0),
		f("1/s-30", 1, 1, 30, 0, A, 0),
		f("1/s-31", 1, 1, 31, 0, A, 0),
		f("1/s-30-B", 1, 1, 30, 0, B, 0),
		f("1/s-31-B", 1, 1, 31, 0, B, 0),
		f("500/s-15359", 500, 1, 15359, 0, A, 0),
		f("500/s-15360", 500, 1, 15360, 0, A, 0),
		f("0.3-5", 3, 10, 5, 0, A, 0),
		f("0.3-md6.1438", 3, 10, 5, 6.1438, A, 0),
		f("0.3-md6.1439", 3, 10, 5, 6.1439, A, 0),
		f("7.3-20", 73, 10, 20, 0, A, 0),
		f("18387-1", 18387, 1, 1, 0, A, 0),
		f("8e6-28767", 8_000_000, 1, 28767, 0, A, 0),
		f("8e6-28768", 8_000_000, 1, 28768, 0, A, 0),
		f("8e6-30000", 8_000_000, 1, 30000, 0, A, 0),
		f("16384000-24575", 16_384_000, 1, 24575, 0, A, 0),
		f("16384000-24576", 16_384_000, 1, 24576, 0, A, 0),
		f("16385000-1", 16_385_000, 1, 1, 0, A, 0),
		f("16384000/3-8191", 16_384_000, 3, 8191, 0, A, 0),
		f("16384000/3-8192", 16_384_000, 3, 8192, 0, A, 0),
		f("5001/s-30", 5001, 1, 30, 0, A, 0),
		f("5001/s-md60.533", 5001, 1, 30, 60.533, A, 0),
		f("5001/s-md60.534", 5001, 1, 30, 60.534, A, 0),
		f("5001/s-md60.533-B", 5001, 1, 30, 60.533, B, 0),
		f("5001/s-md60.534-B", 5001, 1, 30, 60.534, B, 0),
		// MaxDebt in units not a float32 (held at the float32 above it).
		every("every7ms-md2396747", 7*time.Millisecond, 100, 2396747, A),
		{name: "every7ms-md2396747-rc", lim: limit.Every(7 * time.Millisecond), p: 1000, q: 7, burst: 100, maxDebt: 2396747, rc: 9},
		{name: "pi-md80001-rc", lim: limit.Limit(math.Pi), burst: 100, maxDebt: 80001, rc: 3},
		// Short fractions the code rounds (drain above 4096; odd part's
		// bits plus MaxDebt's above 24): see audit84_units_findings_test.go.
		f("5001/s-10000", 5001, 1, 10000, 0, A, 0),
		f("1/min-4096", 1, 60, 4096, 0, A, 0),
		every("every514ms-20000", 514*time.Millisecond, 20000, 0, A),
		// Bursts beyond 65535 tokens where the rate is rounded (adds may round).
		{name: "pi-100000", lim: limit.Limit(math.Pi), burst: 100000},
		{name: "0.7-3000000", lim: limit.Limit(0.7), p: 7, q: 10, burst: 3_000_000, rc: 2},
		{name: "sqrt2-8388608", lim: limit.Limit(math.Sqrt2), burst: 1 << 23},
		f("1/min-md16777216", 1, 60, 1000, 1<<24, A, 1),
		// Buckets-eligible rates forced onto the count-min.
		f("10/s-20-cm", 10, 1, 20, 0, C, 1),
		f("1000/s-30719-cm", 1000, 1, 30719, 0, C, 0),
	}
}

// TestAudit84UnitsEdges: each documented edge, both sides.
func TestAudit84UnitsEdges(t *testing.T) {
	testsize.Serial(t)
	for i, c := range audit84unitsEdgeCfgs() {
		if !testsize.Keep(i, 3) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			st := audit84unitsRun(t, c, uint64(1000+i), testsize.Pick(350, 120))
			t.Logf("%s: %+v", c.name, st)
		})
	}
}

// TestAudit84UnitsRandom: seeded random short fractions, Every(d),
// bursts and MaxDebts (fractional too), on Auto and the count-min.
func TestAudit84UnitsRandom(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(84, 8484))
	for i := range testsize.Pick(120, 20) {
		var c audit84unitsCfg
		switch rng.IntN(4) {
		case 0: // Every(d), d in [100 us, 20 s]
			d := time.Duration(100_000 + rng.Int64N(20_000_000_000))
			if rng.IntN(2) == 0 {
				d = d / time.Millisecond * time.Millisecond
			}
			r := new(big.Rat).SetFrac64(int64(time.Second), int64(d))
			c = audit84unitsCfg{lim: limit.Every(d), p: r.Num().Int64(), q: r.Denom().Int64()}
			c.name = fmt.Sprintf("every%v", d)
		case 1: // not a short fraction
			x := math.Exp(rng.Float64()*16 - 8)
			c = audit84unitsCfg{lim: limit.Limit(x), name: fmt.Sprintf("%v", x)}
		default:
			p, q := 1+rng.Int64N(20000), 1+rng.Int64N(3000)
			r := big.NewRat(p, q)
			p, q = r.Num().Int64(), r.Denom().Int64()
			c = audit84unitsFrac(fmt.Sprintf("%d/%d", p, q), p, q, 0, 0, 0, 0)
		}
		c.burst = 1 + int(math.Exp(rng.Float64()*math.Log(60000)))
		if rng.IntN(2) == 0 {
			c.maxDebt = float64(c.burst) * (1 + rng.Float64()*3)
			if rng.IntN(2) == 0 {
				c.maxDebt = math.Ceil(c.maxDebt)
			}
		}
		if rng.IntN(4) == 0 {
			c.rc = 1 + rng.IntN(3)
			if c.maxDebt != 0 && float64(c.rc) > c.maxDebt {
				c.maxDebt = 0
			}
		}
		if rng.IntN(3) == 0 {
			c.eng = limit.CountMin
		}
		c.name = fmt.Sprintf("%d:%s-b%d-md%v-rc%d-%v", i, c.name, c.burst, c.maxDebt, c.rc, c.eng)
		t.Run(c.name, func(t *testing.T) {
			audit84unitsRun(t, c, uint64(5000+i), testsize.Pick(250, 100))
		})
	}
}

// TestAudit84UnitsRandomEdges: seeded random short fractions with the
// burst or MaxDebt put at each edge (2^24 units; Buckets' 61,438 ticks
// and 65,534 with a millisecond) and one either side.
func TestAudit84UnitsRandomEdges(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(84, 4242))
	for i := range testsize.Pick(150, 20) {
		// A token of c/k ms (lowest terms): c units, k drained a ms.
		cu := int64(math.Exp(rng.Float64() * math.Log(40000)))
		k := int64(math.Exp(rng.Float64() * math.Log(20000)))
		if rng.IntN(3) == 0 {
			k = 1
		}
		tok := new(big.Rat).SetFrac64(max(cu, 1), max(k, 1))
		cu, k = tok.Num().Int64(), tok.Denom().Int64()
		r := new(big.Rat).Quo(big.NewRat(1000, 1), tok)
		p, q := r.Num().Int64(), r.Denom().Int64()
		var mdMax int64
		if rng.IntN(2) == 0 {
			mdMax = (1 << 24) / cu
		} else {
			mdMax = min(61438/cu, (65534-k)/cu)
		}
		if mdMax < 2 {
			continue
		}
		c := audit84unitsFrac(fmt.Sprintf("%d/%d", p, q), p, q, 0, 0, 0, 0)
		d := int64(rng.IntN(3) - 1)
		if rng.IntN(2) == 0 {
			c.burst = int(max(mdMax/2+d, 1))
		} else {
			c.burst = int(max(mdMax/4, 1))
			c.maxDebt = float64(min(max(mdMax+d, int64(c.burst)), 1<<24))
		}
		if rng.IntN(4) == 0 {
			c.eng = limit.CountMin
		}
		if rng.IntN(4) == 0 && c.maxDebt == 0 {
			c.rc = 1
		}
		c.name = fmt.Sprintf("%d:%s-b%d-md%v-rc%d-%v", i, c.name, c.burst, c.maxDebt, c.rc, c.eng)
		t.Run(c.name, func(t *testing.T) {
			audit84unitsRun(t, c, uint64(9000+i), testsize.Pick(200, 80))
		})
	}
}
