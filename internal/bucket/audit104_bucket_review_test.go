package bucket

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a104Engine returns an engine of lines lines on a fake clock at
// 7,000,001 ms (odd: a 2-ms tick is mid-tick), seed 4.
func a104Engine(t *testing.T, lines int, law Law, samples int) *Engine {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(7_000_001)
	e, err := New(Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: 4, SaturationSamples: samples})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// a104Exact returns ceil(n*u) (up) or floor(n*u) in big arithmetic.
func a104Exact(n, u float64, up bool) *big.Int {
	p := new(big.Float).SetPrec(128).SetFloat64(n)
	p.Mul(p, new(big.Float).SetPrec(128).SetFloat64(u))
	z, acc := p.Int(nil) // truncates toward 0 (n >= 0 here)
	if up && acc == big.Below {
		z.Add(z, big.NewInt(1))
	}
	return z
}

// TestAudit104BucketUnitsLimitUnitsExact (passes): for u = 1, 2, 3, 7,
// 1500, 4095, 6143, 61437, 61438 ticks a unit and n from subnormals to
// past 2^62 ticks (random exponents and fractions, the float neighbours
// of k/u for k at 0..4, 2^52, 2^53, 2^62 and 2^62 - 256 ticks, products
// that are exactly integers with a negative residual), units(n) is
// never below ceil(n x u) and limitUnits(n) never above floor(n x u)
// (math/big; exactly them where the float64 product is below 2^53, at
// most half a float step off past it: see
// TestAudit104BucketFixedUnitsNotExactPast2p53), or unitsCap / 2^62 exactly
// where the float64 product reaches 2^62; never a wrapped value. A negative limit gives 0.
func TestAudit104BucketUnitsLimitUnitsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(104, 2))
	cap62 := new(big.Int).Lsh(big.NewInt(1), 62)
	for _, u := range []float64{1, 2, 3, 7, 1500, 4095, 6143, 61437, 61438} {
		q := quant{u: u}
		check := func(n float64) {
			if n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
				return
			}
			c, l := q.units(n), q.limitUnits(n)
			up, dn := a104Exact(n, u, true), a104Exact(n, u, false)
			if float64(n*u) >= 1<<62 {
				if c != unitsCap || l != 1<<62 {
					t.Fatalf("u %v n %v: saturated product gave units %d limitUnits %d", u, n, c, l)
				}
				return
			}
			bc, bl := new(big.Int).SetUint64(c), new(big.Int).SetUint64(l)
			if up.Cmp(cap62) >= 0 || bc.Cmp(up) < 0 || bl.Cmp(dn) > 0 {
				t.Fatalf("u %v n %v (%b): units %d limitUnits %d on the unsafe side of %v, %v", u, n, n, c, l, up, dn)
			}
			if float64(n*u) < 1<<53 && (bc.Cmp(up) != 0 || bl.Cmp(dn) != 0) {
				t.Fatalf("u %v n %v (%b): units %d limitUnits %d, exact %v, %v", u, n, n, c, l, up, dn)
			}
			// Past 2^53 the finding below: at most half a float step off.
			if d := new(big.Int).Sub(bc, up); d.Cmp(big.NewInt(256)) > 0 {
				t.Fatalf("u %v n %v: units %d is %v over", u, n, c, d)
			}
			if d := new(big.Int).Sub(dn, bl); d.Cmp(big.NewInt(256)) > 0 {
				t.Fatalf("u %v n %v: limitUnits %d is %v under", u, n, l, d)
			}
		}
		around := func(x float64) {
			y := x
			for range 6 {
				check(y)
				y = math.Nextafter(y, 0)
			}
			y = x
			for range 6 {
				check(y)
				y = math.Nextafter(y, math.Inf(1))
			}
		}
		for _, ticks := range []float64{0, 1, 2, 3, 4, 0.5, 1 << 52, 1<<52 + 1, 1 << 53, 1<<53 + 2, 1<<62 - 512, 1<<62 - 256, 1<<62 - 768, 1 << 62, 1 << 61} {
			around(ticks / u)
			around(ticks)
		}
		around(math.SmallestNonzeroFloat64)
		around(0x1p-1022)
		for range 2500 {
			m := r.Float64() + 0.5
			e := r.IntN(140) - 70
			if r.IntN(10) == 0 {
				e = r.IntN(2200) - 1100
			}
			x := math.Ldexp(m, e) / u
			switch r.IntN(4) {
			case 0:
				x = math.Round(x*u) / u // k/u: the product near an integer
			case 1:
				x = math.Ldexp(math.Floor(math.Ldexp(m, 53)), e-53)
			}
			check(x)
			check(math.Nextafter(x, 0))
			check(math.Nextafter(x, 2*x+1))
		}
		if q.limitUnits(-1) != 0 || q.limitUnits(-math.SmallestNonzeroFloat64) != 0 || q.limitUnits(math.Copysign(0, -1)) != 0 || q.limitUnits(-math.MaxFloat64) != 0 {
			t.Fatalf("u %v: a negative limit's units are not 0", u)
		}
		if q.units(math.MaxFloat64) != unitsCap || q.limitUnits(math.MaxFloat64) != 1<<62 {
			t.Fatalf("u %v: MaxFloat64 not saturated", u)
		}
	}
}

// TestAudit104BucketFitsExactAgainstBig (passes): quant.fits for debts
// 0..span and loads and limits at every magnitude (ticks within an
// integer of each other, fractional, past 2^53 and 2^62) never admits
// where debt/u + n > limit in big arithmetic, and admits exactly when
// it fits for whole loads and limits whose ticks are below 2^53 (a
// fractional load and limit each round by under a tick, against
// admission, by design).
func TestAudit104BucketFitsExactAgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(104, 3))
	for _, law := range []Law{Linear(10, 40), Linear(1000, 1), Linear(500, 40000), None(3)} {
		q, err := newQuant(law)
		if err != nil {
			t.Fatal(err)
		}
		exact := func(debt uint64, n, limit float64) bool {
			s := new(big.Rat).SetFrac(new(big.Int).SetUint64(debt), new(big.Int).SetUint64(uint64(q.u)))
			s.Add(s, new(big.Rat).SetFloat64(n))
			return s.Cmp(new(big.Rat).SetFloat64(limit)) <= 0
		}
		for range 2000 {
			debt := uint64(r.IntN(int(q.span) + 1))
			scale := math.Ldexp(1, r.IntN(140)-70)
			limit := scale * (0.5 + r.Float64())
			var n float64
			switch r.IntN(3) {
			case 0:
				n = limit - float64(debt)/q.u
			case 1:
				n = limit * r.Float64()
			default:
				limit = math.Round(limit)
				n = math.Round(limit - float64(debt)/q.u + float64(r.IntN(3)-1))
			}
			n = max(n, 0)
			for _, nn := range []float64{n, math.Nextafter(n, 0), math.Nextafter(n, math.Inf(1))} {
				c, lim := q.units(nn), q.limitUnits(limit)
				got, want := q.fits(debt, c, lim, nn, limit), exact(debt, nn, limit)
				if got && !want {
					t.Fatalf("%v: fits(debt %d, n %v, limit %v) admits past the limit", law, debt, nn, limit)
				}
				if nn == math.Floor(nn) && limit == math.Floor(limit) && max(nn, limit)*q.u < 1<<53 && got != want {
					t.Fatalf("%v: fits(debt %d, n %v, limit %v) = %v in ticks, exact %v", law, debt, nn, limit, got, want)
				}
			}
		}
	}
}

// a104KeysByPair returns, for every ordered pair of lines (i0, i1) that
// locate can give on e, one key of that pair (nil where none found).
func a104KeysByPair(e *Engine) [][]string {
	n := int(e.n)
	keys := make([][]string, n)
	for i := range keys {
		keys[i] = make([]string, n)
	}
	left := 0
	for i := range n {
		for j := range n {
			if i != j {
				left++
			}
		}
	}
	for k := 0; left > 0 && k < 200000; k++ {
		key := fmt.Sprint("fresh", k)
		i0, i1, _ := e.Locate(key)
		if keys[i0][i1] == "" {
			keys[i0][i1] = key
			left--
		}
	}
	return keys
}

// TestAudit104BucketSaturationMatchesTryUpdateFresh (passes): on engines
// of 2 to 5 lines whose slots are empty and whose floors lie around the
// threshold (1-ms ticks, 2-ms ticks read mid-tick, fractional loads and
// limits, a room of the span or more, limits and loads past 2^62 ticks),
// Saturation equals the share of locate's (i0, i1) draws (i0 uniform,
// i1 uniform with a collision moved to i0+1) whose fresh key a real
// TryUpdate denies (each probe's writes undone before the next), to
// 1e-12.
func TestAudit104BucketSaturationMatchesTryUpdateFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(104, 4))
	mixed, ones := 0, 0 // cases where some but not all draws deny; all deny
	for _, law := range []Law{Linear(10, 40), Linear(500, 40000), Linear(3, 7)} {
		for lines := 2; lines <= 5; lines++ {
			e := a104Engine(t, lines, law, 0)
			keys := a104KeysByPair(e)
			q := &e.q
			if law.Rate == 500 && q.gd != 2 {
				t.Fatalf("setup: %v has %d ms a tick, want 2", law, q.gd)
			}
			now := Tick(e)
			u := q.u
			cases := [][2]float64{{1, 20}, {0.3, 7.7}, {0, 0.5}, {2.5, 3}}
			big := math.Ldexp(1, 62) / u
			cases = append(cases, [2]float64{big, big + 10}, [2]float64{big, big + 1e6}, [2]float64{1, 1e300}, [2]float64{big * 4, big*4 + 3*q.max/4})
			for _, nl := range cases {
				n, limit := nl[0], min(nl[1], 1e300)
				if nl[0] < 10 {
					n, limit = nl[0]*q.max/40, nl[1]*q.max/40
				}
				for range 6 {
					// Random floors: none, or a stamp around the room.
					room := (limit - n) * u
					for i := range lines {
						h := e.lines[i].w[0].Load()
						lt := q.lo(hdrLW(h))
						var fo uint64
						if r.IntN(4) != 0 {
							off := int64(math.Min(room, float64(q.span))) + int64(r.IntN(5)) - 2
							if r.IntN(3) == 0 {
								off = int64(q.span) + 1 - int64(r.IntN(3))
							}
							off = min(off, int64(q.span)+1) // stamps reach t + span + 1 at most
							st := int64(now) + max(off, 1)
							fo = uint64(st) - lt
						}
						e.lines[i].w[0].Store(mkHdr(hdrLW(h), fo))
					}
					var saved [8][wordsPerLine]uint64
					for i := range lines {
						for j := range wordsPerLine {
							saved[i][j] = e.lines[i].w[j].Load()
						}
					}
					denied := 0.0
					for i0 := range lines {
						for j := range lines {
							i1 := j
							if i1 == i0 {
								i1 = (i0 + 1) % lines
							}
							key := keys[i0][i1]
							if key == "" {
								t.Fatalf("no key on (%d, %d)", i0, i1)
							}
							if !e.TryUpdate(key, n, limit) {
								denied += 1 / float64(lines*lines)
							}
							for i := range lines {
								for j := range wordsPerLine {
									e.lines[i].w[j].Store(saved[i][j])
								}
							}
						}
					}
					sat := e.Saturation(n, limit)
					if denied > 0.01 && denied < 0.99 {
						mixed++
					} else if denied > 0.99 {
						ones++
					}
					if math.Abs(sat-denied) > 1e-12 {
						fl := make([]uint64, lines)
						for i := range fl {
							fl[i] = StateOf(e, i).Floor
						}
						t.Fatalf("%v, %d lines, n %v limit %v: Saturation %v, TryUpdate denies %v (now %d, floors %v, span %d, u %v)", law, lines, n, limit, sat, denied, now, fl, q.span, u)
					}
				}
			}
		}
	}
	if mixed < 50 || ones == 0 {
		t.Fatalf("setup: only %d mixed and %d all-denied cases", mixed, ones)
	}
	t.Logf("%d mixed, %d all-denied cases", mixed, ones)
}

// TestAudit104BucketSaturationNoAllocsAtBoundary (passes): Saturation
// does not allocate on an engine of exactly 4096 lines with
// SaturationSamples 16 (read whole), of 4097 lines (sampled), or of
// 5000 lines with SaturationSamples 6000 (read whole).
func TestAudit104BucketSaturationNoAllocsAtBoundary(t *testing.T) {
	for _, c := range []struct{ lines, samples int }{{4096, 16}, {4097, 0}, {5000, 6000}} {
		e := a104Engine(t, c.lines, Linear(10, 40), c.samples)
		for k := range 3000 {
			e.Update(fmt.Sprint("k", k), 30)
		}
		if a := testing.AllocsPerRun(5, func() { e.Saturation(1, 20) }); a != 0 {
			t.Errorf("lines %d samples %d: Saturation allocates %v", c.lines, c.samples, a)
		}
		if c.lines != 4097 {
			a, b := e.Saturation(1, 20), e.Saturation(1, 20)
			if a != b {
				t.Errorf("lines %d samples %d: read whole, yet two calls read %v and %v", c.lines, c.samples, a, b)
			}
		}
	}
}

// TestAudit104BucketFixedSaturationIgnoresSmallSampleCount (audit 104; fixed at stop 60, the
// text below says what was wrong):
//
// Doc says: engine.go, Config.SaturationSamples: "SaturationSamples is
// the number of lines Saturation samples (0 means 4096)"; saturation.go:
// "samples Config.SaturationSamples lines (4096 by default ...)"; an
// engine of at most max(SaturationSamples, 4096) lines is read whole,
// "larger ones sample".
//
// Code does: samples := min(max(e.sample, exactLines), int(e.n)). The max
// meant to make small engines exact also raises the sample count of
// every larger engine to at least 4096: SaturationSamples: 16 on an
// engine of 8192 lines reads 4096 lines per call (256 KiB), not 16. A
// caller who lowered SaturationSamples to make a frequent Saturation
// cheap (a stats scrape per key class) now pays 256x.
//
// Minimal repro: Linear(10, 40), 8192 lines, SaturationSamples 16, line i
// holding i%3 entries that deny 1 under 20 and no floors: with 16
// samples the mean h is k/16 for a whole k, so 16h recovered from
// Saturation(1, 20) = 1 - (1-1/65535)^(2h) is a whole number on every
// call; it is not (h is k/4096).
//
// Suggested fix: samples := e.sample; if int(e.n) <= max(e.sample,
// exactLines) { samples = int(e.n) } (small engines whole, larger ones
// sample SaturationSamples as documented), or document that the count
// is at least 4096.
func TestAudit104BucketFixedSaturationIgnoresSmallSampleCount(t *testing.T) {
	e := a104Engine(t, 8192, Linear(10, 40), 16)
	now := Tick(e)
	tok := uint64(e.q.u)
	for i := range 8192 {
		for s := range i % 3 {
			e.poke(i, s, uint16(0x4000+s), now+30*tok)
		}
	}
	whole := 0
	for call := range 8 {
		sat := e.Saturation(1, 20)
		h := math.Log1p(-sat) / (2 * math.Log1p(-1.0/65535))
		if k := h * 16; math.Abs(k-math.Round(k)) < 1e-6 {
			whole++
		} else if call == 0 {
			t.Logf("call 0: h = %v, 16h = %v (h x 4096 = %v)", h, k, h*4096)
		}
	}
	if whole != 8 {
		t.Errorf("SaturationSamples 16 on 8192 lines: 16h is whole on %d of 8 calls; Saturation samples more than the configured 16 lines", whole)
	}
}

// TestAudit104BucketFixedExponentialSaturationDisagreesWithTryUpdate (audit 104; fixed at stop 60, the
// text below says what was wrong):
//
// Doc says: saturation.go: Saturation returns "the estimated probability
// that a fresh key ... asking for n now under limit is denied"; commit
// b8b0d03: "Saturation takes its threshold as the operation decides".
//
// Code does: the linear path now mirrors fits (the debt capped at the
// span), but the exponential path still takes theta = t +
// floor(log((limit-n)/eps)/kappa), while TryUpdate denies when
// q.value(est, t) + n > limit, and q.value clamps at Max (a full load's
// stamp t + span reads Max, yet span = ceil(ln(Max/eps)/kappa) is one
// above floor(ln(Max/eps)/kappa) unless that is whole) and multiplies by
// (1 + 1e-12). So (a) with limit - n = Max, every floor at a full load
// (stamp t + span, what an eviction of a Max key leaves) counts as
// denying, though TryUpdate admits every fresh key: Saturation reads 1
// for a true 0; (b) with n = 0, limit = eps exp(kappa k)(1 + 5e-13), a floor
// at t + k counts as fine though TryUpdate denies every fresh key
// (Saturation 0 for a true 1).
//
// Minimal repro: Exponential(1, 100, 0), 2 lines, both floors at now +
// span: Saturation(1, 101) = 1, TryUpdate(fresh, 1, 101) true; both
// floors at now + k (k = span/2): Saturation(0, eps e^(kappa k)
// (1+5e-13)) = 0, TryUpdate(fresh, 0, that) false.
//
// Suggested fix: take theta from the operation's own test: start from
// k = floor(log(room/eps)/kappa), step k while q.value(t+k+1, t) + n <=
// limit and back while q.value(t+k, t) + n > limit (a step or two), and
// theta = t + span + 1 when q.value(t+span+1, t) + n <= limit (a room of
// Max or more denies nothing).
func TestAudit104BucketFixedExponentialSaturationDisagreesWithTryUpdate(t *testing.T) {
	e := a104Engine(t, 2, Exponential(1, 100, 0), 0)
	q := &e.q
	now := Tick(e)
	keys := a104KeysByPair(e)
	setFloors := func(st uint64) [2][wordsPerLine]uint64 {
		var saved [2][wordsPerLine]uint64
		for i := range 2 {
			h := e.lines[i].w[0].Load()
			e.lines[i].w[0].Store(mkHdr(hdrLW(h), st-q.lo(hdrLW(h))))
			for j := range wordsPerLine {
				saved[i][j] = e.lines[i].w[j].Load()
			}
		}
		return saved
	}
	probe := func(saved [2][wordsPerLine]uint64, n, limit float64) float64 {
		denied := 0.0
		for i0 := range 2 {
			for j := range 2 {
				i1 := j
				if i1 == i0 {
					i1 = 1 - i0
				}
				if !e.TryUpdate(keys[i0][i1], n, limit) {
					denied += 0.25
				}
				for i := range 2 {
					for w := range wordsPerLine {
						e.lines[i].w[w].Store(saved[i][w])
					}
				}
			}
		}
		return denied
	}
	if f := math.Floor(math.Log(q.max/q.eps) / q.kappa); uint64(f) >= q.span {
		t.Fatalf("setup: floor(ln(Max/eps)/kappa) = %v is the span %d", f, q.span)
	}
	// (a) a room of Max: full loads deny nothing.
	saved := setFloors(now + q.span)
	if v := q.value(now+q.span, now); v != q.max {
		t.Fatalf("setup: a full stamp reads %v", v)
	}
	satA, trueA := e.Saturation(1, 101), probe(saved, 1, 101)
	// (b) the (1 + 1e-12) factor.
	k := q.span / 2
	saved = setFloors(now + k)
	limit := q.eps * math.Exp(q.kappa*float64(k)) * (1 + 5e-13)
	satB, trueB := e.Saturation(0, limit), probe(saved, 0, limit)
	if satA != trueA || satB != trueB {
		t.Errorf("exponential: floors at a full load, Saturation(1, Max+1) = %v, TryUpdate denies %v; floors at k = %d, Saturation(0, %v) = %v, TryUpdate denies %v", satA, trueA, k, limit, satB, trueB)
	}
}

// TestAudit104BucketFixedUnitsNotExactPast2p53 (audit 104; fixed at stop 60, the
// text below says what was wrong):
//
// Doc says: law.go: units is "the least whole number of ticks at or
// above n x u, the product taken exactly"; limitUnits is "rounded down
// exactly (the greatest whole number of ticks at or below limit x u)";
// fits: "debt+c <= lim // both exact". Commit b8b0d03: "units and
// limitUnits round exactly".
//
// Code does: units only ever adds to ceil(p) (when r > c - p) and
// limitUnits only ever subtracts from floor(p). Past 2^53 ticks p is a
// whole number with a float step of 2 or more, so the residual r can be
// -1 or below (units: n x u = p + r < p, yet units returns p) or +1 or
// above (limitUnits: n x u > p + 1, yet it returns p). Both err on the
// safe side (no admission past the limit), but TryUpdate then denies
// loads that fit exactly, even n = limit on a fresh key, the very
// magnitudes (2^53..2^62 ticks) the commit set out to make exact.
//
// Minimal repro: Linear(3000, 20000) (u = 3). n = 4503599627370495:
// n x 3 = 13510798882111485 rounds to p = ...484 (r = +1), so
// limitUnits(n) = ...484 < floor = ...485. n = 4503599627370497: n x 3
// = ...491 rounds to ...492 (r = -1), units(n) = ...492 > ceil = ...491.
// A fresh key's TryUpdate(n, n) is denied for both.
//
// Suggested fix: past 2^52 ticks p is a whole number and r is exact, so
// the bounds are p + ceil(r) and p + floor(r) in both directions: in
// units, if p >= 1<<52 { return uint64(int64(p) + int64(math.Ceil(r))) }
// (r is within half a step: at most 256 in magnitude below 2^62), and
// in limitUnits the same with math.Floor(r); below 2^52 the present
// code is exact (TestAudit104BucketUnitsLimitUnitsExact).
func TestAudit104BucketFixedUnitsNotExactPast2p53(t *testing.T) {
	e := a104Engine(t, 4, Linear(3000, 20000), 0)
	q := &e.q
	if q.u != 3 {
		t.Fatalf("setup: u = %v, want 3", q.u)
	}
	var bad []string
	for _, n := range []float64{4503599627370495, 4503599627370497} {
		up, dn := a104Exact(n, q.u, true), a104Exact(n, q.u, false)
		if c := q.units(n); new(big.Int).SetUint64(c).Cmp(up) != 0 {
			bad = append(bad, fmt.Sprintf("units(%v) = %d, ceil(n x 3) = %v", n, c, up))
		}
		if l := q.limitUnits(n); new(big.Int).SetUint64(l).Cmp(dn) != 0 {
			bad = append(bad, fmt.Sprintf("limitUnits(%v) = %d, floor(n x 3) = %v", n, l, dn))
		}
		if !e.TryUpdate(fmt.Sprint("fresh", n), n, n) {
			bad = append(bad, fmt.Sprintf("a fresh key's TryUpdate(%v, %v) denied", n, n))
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}
