package bucket

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestChargeDecidesAsFloats drives twin engines (one law, one seed, one
// clock schedule) with the same operations, one through the float
// methods, the other through Charges (its own, or another law's, which
// it must convert on each call), and requires the same decisions and
// the same loads after each. (A seeded sweep rather than rapid: the
// core module's tests need no rapid; tests/internal/bucket has it.)
func TestChargeDecidesAsFloats(t *testing.T) {
	laws := []Law{Linear(10, 40), Linear(1000, 20), Linear(0.37, 3), None(20), Exponential(1, 40, 0)}
	amounts := []float64{0, 1, 0.1, 1e-300, 0.5, 2, 3, 19.999999999999996, 20, 20.000000000000004, 40, 41, 1e300}
	advances := []int64{0, 0, 1, 7, 100, 1000, 5000}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 61))
		law, other := laws[rng.IntN(len(laws))], laws[rng.IntN(len(laws))]
		ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		ca.Set(1_000_000)
		cb.Set(1_000_000)
		a, b, o := newTest(t, 8, law, ca), newTest(t, 8, law, cb), newTest(t, 8, other, nil)
		amount := func() float64 {
			if rng.IntN(2) == 0 {
				return amounts[rng.IntN(len(amounts))]
			}
			return rng.Float64() * 50
		}
		for i := range 1 + rng.IntN(60) {
			key := fmt.Sprint(rng.IntN(4))
			n, limit := amount(), amount()
			ch := b.Charge(n, limit)
			if rng.IntN(2) == 0 {
				ch = o.Charge(n, limit)
			}
			var got, want bool
			if rng.IntN(4) == 0 {
				a.Update(key, n)
				b.AddCharge(key, ch)
				got, want = true, true
			} else {
				want, got = a.TryUpdate(key, n, limit), b.TryCharge(key, ch)
			}
			if got != want {
				t.Fatalf("seed %d op %d (%v, other %v): key %s n %v limit %v: TryCharge %v, TryUpdate %v", seed, i, law, other, key, n, limit, got, want)
			}
			if qa, qb := a.Query(key), b.Query(key); qa != qb {
				t.Fatalf("seed %d op %d: key %s: load %v through Charges, %v through floats", seed, i, key, qb, qa)
			}
			d := time.Duration(advances[rng.IntN(len(advances))]) * time.Millisecond
			ca.Advance(d)
			cb.Advance(d)
		}
	}
}

// TestChargeAtDecidesAsFloats is the At forms' check on one schedule.
func TestChargeAtDecidesAsFloats(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	a, b := newTest(t, 8, Linear(10, 40), clk), newTest(t, 8, Linear(10, 40), clk)
	ch, rej := b.Charge(1, 20), b.Charge(0.5, 0)
	for i := range 200 {
		at := clk.Now().Add(time.Duration(i*37) * time.Millisecond)
		want, got := a.TryUpdateAt(at, "k", 1, 20), b.TryChargeAt(at, "k", ch)
		if got != want {
			t.Fatalf("step %d: TryChargeAt %v, TryUpdateAt %v", i, got, want)
		}
		a.UpdateAt(at, "k", 0.5)
		b.AddChargeAt(at, "k", rej)
		if qa, qb := a.QueryAt(at, "k"), b.QueryAt(at, "k"); qa != qb {
			t.Fatalf("step %d: load %v through Charges, %v through floats", i, qb, qa)
		}
	}
}

// TestChargePanicsAsTryUpdate: Charge checks its amounts as TryUpdate does.
func TestChargePanicsAsTryUpdate(t *testing.T) {
	e := newTest(t, 8, Linear(10, 40), nil)
	for _, c := range []struct{ n, limit float64 }{
		{math.NaN(), 1}, {-1, 1}, {math.Inf(1), 1}, {1, math.NaN()}, {1, math.Inf(1)}, {1, math.Inf(-1)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Charge(%v, %v) did not panic", c.n, c.limit)
				}
			}()
			e.Charge(c.n, c.limit)
		}()
	}
}

// TestChargeAllocatesNothing: the Charge paths are as free as the float ones.
func TestChargeAllocatesNothing(t *testing.T) {
	e := newTest(t, 64, Linear(10, 40), nil)
	ch := e.Charge(1, 20)
	if n := testing.AllocsPerRun(100, func() {
		e.TryCharge("k", ch)
		e.AddCharge("j", ch)
	}); n != 0 {
		t.Fatalf("TryCharge and AddCharge: %v allocations a call", n)
	}
}
