package bucket

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit103BucketFitsNeverAdmitsPastLimit (passes): quant.fits, for
// debts of 0..span ticks and loads and limits on both sides of the
// 2^62-tick saturation (ticks below 2^53 for whole loads and limits,
// where float64 products are exact, and tokens past 2^62), never admits where the exact
// rational debt/u + n exceeds limit (big.Rat of the float64 inputs),
// for u = 1, 1500 and 61438 ticks a unit; and at the boundary n = limit,
// n = limit - debt/u, one float step over, it decides as the exact sum.
func TestAudit103BucketFitsNeverAdmitsPastLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(103, 1))
	for _, law := range []Law{Linear(10, 40), Linear(16_384_000, 1), Linear(1000, 1)} {
		q, err := newQuant(law)
		if err != nil {
			t.Fatal(err)
		}
		exact := func(debt uint64, n, limit float64) bool {
			s := new(big.Rat).SetFrac(new(big.Int).SetUint64(debt), new(big.Int).SetUint64(uint64(q.u)))
			s.Add(s, new(big.Rat).SetFloat64(n))
			return s.Cmp(new(big.Rat).SetFloat64(limit)) <= 0
		}
		try := func(debt uint64, n, limit float64) {
			c, lim := q.units(n), q.limitUnits(limit)
			if c < unitsCap && lim < 1<<62 && (max(n, limit)*q.u >= 1<<53 || n != math.Floor(n) || limit != math.Floor(limit)) {
				// Ticks past 2^53 (TestAudit103BucketFitsTicksPast2p53AdmitOver),
				// or a fractional load whose product rounds (the known
				// float64 tick rounding, under a tick).
				return
			}
			got := q.fits(debt, c, lim, n, limit)
			if got && !exact(debt, n, limit) {
				t.Fatalf("u %v: fits(debt %d, n %v, limit %v) admits past the limit", q.u, debt, n, limit)
			}
		}
		sat := math.Ldexp(1, 62) / q.u // tokens at the saturation
		for range 6000 {
			debt := uint64(r.IntN(int(q.span) + 1))
			scale := sat * math.Ldexp(1, r.IntN(40)-20)
			limit := scale * (0.5 + r.Float64())
			var n float64
			switch r.IntN(4) {
			case 0:
				n = limit - float64(debt)/q.u
			case 1:
				n = limit * r.Float64()
			case 2:
				n = math.Nextafter(limit-float64(debt)/q.u, math.Inf(1))
			default:
				n = r.Float64() * q.max
			}
			if n < 0 {
				n = 0
			}
			try(debt, n, limit)
			try(debt, n, math.Nextafter(limit, 0))
			try(debt, math.Round(n), math.Round(limit))
			try(debt, math.Round(n)+1, math.Round(limit))
		}
		// Past the cap, n = limit fits only with no debt.
		for _, lim := range []float64{sat, 2 * sat, 1e30, 1e300} {
			if !q.fits(0, q.units(lim), q.limitUnits(lim), lim, lim) {
				t.Errorf("u %v: n = limit = %v denied with no debt", q.u, lim)
			}
			if q.fits(1, q.units(lim), q.limitUnits(lim), lim, lim) {
				t.Errorf("u %v: n = limit = %v admitted with a tick of debt", q.u, lim)
			}
		}
	}
}

// TestAudit103BucketHugeLoadAtEndOfTime (passes): on a law of 16,384
// ticks a ms with the engine's time at its last ms (2^47 - 1: ticks
// near 2^61), an Update of 1e300 (units saturates at 2^62 + 1: ns =
// max(est, thi) + c stays below 2^63) reads Max, TryUpdate(fresh, 1e30,
// 1e31) is admitted and reads Max, TryUpdate(fresh, 1e31, 1e30) is
// denied, and a fresh key's TryReserve of 1e30 gives an unrefundable
// receipt (it filled the key to Max).
func TestAudit103BucketHugeLoadAtEndOfTime(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e, err := New(Config{Lines: 8, Law: Linear(16_384_000, 1), Clock: clk, SeedSet: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(1_000_000 + lwMask + 1000)
	if ms := NowMs(e); ms != lwMask {
		t.Fatalf("engine ms %d, want %d", ms, uint64(lwMask))
	}
	if tk := Tick(e); tk < 1<<60 {
		t.Fatalf("tick %d, want near 2^61", tk)
	}
	e.Update("u", 1e300)
	if v := e.Query("u"); v != 1 {
		t.Errorf("Update(1e300) reads %v, want Max 1", v)
	}
	if ok, v := e.TryUpdateAndQuery("a", 1e30, 1e31); !ok || v != 1 {
		t.Errorf("TryUpdateAndQuery(fresh, 1e30, 1e31) = %v, %v; want true, 1", ok, v)
	}
	if e.TryUpdate("b", 1e31, 1e30) {
		t.Error("TryUpdate(fresh, 1e31, 1e30) admitted")
	}
	rc, ok := e.TryReserve("c", 1e30, 1e30)
	if !ok {
		t.Fatal("TryReserve(fresh, 1e30, 1e30) denied")
	}
	if e.Refund(&rc) {
		t.Error("a receipt that filled the key to Max refunded")
	}
	if v := e.Query("c"); v != 1 {
		t.Errorf("c reads %v, want 1", v)
	}
}

// TestAudit103BucketModelMirrorsEdges (passes): the Model and the engine
// agree operation for operation and line for line, run sequentially,
// on the inputs the commit changed: loads past 2^62 ticks, limits past
// it, negative limits, limits at Max + n, on 2 ms ticks at odd ms (the
// Max cap) and on 15 ticks a ms, with the clock moving by 0..3 ms and
// sometimes seconds.
func TestAudit103BucketModelMirrorsEdges(t *testing.T) {
	ns := []float64{0, 1, 0.5, 3, 40, 41, 1e16, 1e30, 1e300}
	limits := []float64{-1, -1e-300, 0, 1, 20, 40, 40.001, 41, 80, 1e16, 1e17, 1e30, 1e31, 1e300}
	for _, law := range []Law{Linear(0.5, 40), Linear(10, 40), None(40)} {
		for seed := range uint64(6) {
			clk := sketchtest.NewFakeClock()
			clk.Set(7_000_000)
			e, err := New(Config{Lines: 3, Law: law, Clock: clk, SeedSet: true, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			m := NewModel(e)
			r := rand.New(rand.NewPCG(seed, 103))
			keys := make([]string, 50)
			for i := range keys {
				keys[i] = fmt.Sprint("k", i)
			}
			for step := range 600 {
				if r.IntN(3) == 0 {
					clk.Advance(time.Duration(r.IntN(4)) * time.Millisecond)
				}
				if r.IntN(40) == 0 {
					clk.Advance(time.Duration(r.IntN(30000)) * time.Millisecond)
				}
				k := keys[r.IntN(len(keys))]
				n, lim := ns[r.IntN(len(ns))], limits[r.IntN(len(limits))]
				ms := NowMs(e)
				var eok, mok bool
				var ev, mv float64
				switch r.IntN(3) {
				case 0:
					eok, ev = e.TryUpdateAndQuery(k, n, lim)
					mok, mv, _ = m.Do(k, ms, OpTry, n, lim)
				case 1:
					ev = e.UpdateAndQuery(k, n)
					eok = true
					_, mv, _ = m.Do(k, ms, OpAdd, n, 0)
					mok = true // an Add always succeeds
				default:
					ev = e.Query(k)
					_, mv, _ = m.Do(k, ms, OpQuery, 0, 0)
				}
				if eok != mok || ev != mv {
					t.Fatalf("%v seed %d step %d: engine (%v, %v) != model (%v, %v)", law.Kind, seed, step, eok, ev, mok, mv)
				}
				if ev > law.Max {
					t.Fatalf("%v seed %d step %d: reads %v above Max", law.Kind, seed, step, ev)
				}
			}
			for i := range 3 {
				if es, ml := StateOf(e, i), m.Line(i); es != ml {
					t.Fatalf("%v seed %d: line %d: engine %+v != model %+v", law.Kind, seed, i, es, ml)
				}
			}
		}
	}
}

// TestAudit103BucketSaturationExactFloorTerm (passes): with no live
// entries (h = 0), Saturation on an engine of at most SaturationSamples
// lines is 1 - P(both of a fresh key's lines fine), and that matches
// the enumeration of locate's pairs (i0 uniform, i1 uniform with a
// collision moved to i0+1) for n = 2, 3, 5 and 7 and every pattern of
// denying floors (set in the headers), and the share of 8,000 probe
// keys whose Query + 1 > 20 within 5 standard errors on n = 3 and 5.
func TestAudit103BucketSaturationExactFloorTerm(t *testing.T) {
	for _, n := range []int{2, 3, 5, 7} {
		for mask := range 1 << n {
			e := newTest(t, n, Linear(10, 40), nil)
			now := Tick(e)
			tok := uint64(e.q.u)
			fine := make([]bool, n)
			for i := range n {
				fine[i] = mask>>i&1 == 0
				if !fine[i] {
					h := e.lines[i].w[0].Load()
					lt := e.q.lo(hdrLW(h))
					fl := now + 30*tok // 30 tokens: denies 1 under 20
					e.lines[i].w[0].Store(mkHdr(hdrLW(h), fl-lt))
				}
			}
			pass := 0.0
			for i0 := range n {
				for j := range n {
					i1 := j
					if i1 == i0 {
						i1 = (i0 + 1) % n
					}
					if fine[i0] && fine[i1] {
						pass += 1 / float64(n*n)
					}
				}
			}
			sat := e.Saturation(1, 20)
			if math.Abs(sat-(1-pass)) > 1e-12 {
				t.Errorf("n %d mask %b: Saturation %v, enumeration %v", n, mask, sat, 1-pass)
			}
			if (n == 3 || n == 5) && mask%3 == 1 {
				const probes = 8000
				meas := 0
				for k := range probes {
					if e.Query(fmt.Sprint("p", k))+1 > 20 {
						meas++
					}
				}
				p := float64(meas) / probes
				if se := math.Sqrt(max(sat*(1-sat), 1e-4) / probes); math.Abs(p-sat) > 5*se {
					t.Errorf("n %d mask %b: measured %v, Saturation %v", n, mask, p, sat)
				}
			}
		}
	}
}

// TestAudit103BucketSaturationNoAllocs (passes): Saturation does not
// allocate on either path (the exact floor term of a small engine, the
// histogram of a large one).
func TestAudit103BucketSaturationNoAllocs(t *testing.T) {
	for _, c := range []struct{ lines, samples int }{{64, 0}, {64, 16}, {5000, 0}} {
		e := newTest(t, c.lines, Linear(10, 40), nil)
		if c.samples != 0 {
			e.sample = c.samples
		}
		for k := range 2000 {
			e.Update(fmt.Sprint("k", k), 30)
		}
		if a := testing.AllocsPerRun(10, func() { e.Saturation(1, 20) }); a != 0 {
			t.Errorf("lines %d samples %d: Saturation allocates %v", c.lines, c.samples, a)
		}
	}
}

// TestAudit103BucketSaturationConcurrentFloors (passes): Saturation's
// exact path reading headers while goroutines evict on a 4-line engine
// (floors rising, lines moving) stays within [0, 1], reads 1 once the
// flood has floored every line above the limit, and is race-free.
func TestAudit103BucketSaturationConcurrentFloors(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e, err := New(Config{Lines: 4, Law: Linear(10, 40), Clock: clk, SeedSet: true, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for k := 0; k < 3000 && !stop.Load(); k++ {
				e.Update(fmt.Sprint("g", g, "-", k), 40)
				if k%100 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	reads := 0
	for range 300 {
		s := e.Saturation(1, 20)
		if !(s >= 0 && s <= 1) {
			t.Errorf("Saturation %v outside [0, 1]", s)
		}
		reads++
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	for k := range 200 {
		e.Update(fmt.Sprint("last", k), 40)
	}
	if s := e.Saturation(1, 20); s < 0.999 {
		floors := make([]uint64, 4)
		for i := range floors {
			floors[i] = StateOf(e, i).Floor
		}
		t.Errorf("after the flood Saturation(1, 20) = %v; floors %v (now %d)", s, floors, Tick(e))
	}
}
