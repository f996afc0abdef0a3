package core_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestOutlookFitsIn: Outlook.FitsIn's x is the least wait after which
// TryUpdate admits, as the sketch itself decides: with nothing written
// in between, TryUpdateString(k, d, limit) is denied x - 1 ms later (a
// denial writes nothing) and admitted x ms later. Random histories on
// few cells (keys collide), decaying laws, every aggregator, bounds a
// float32 holds and bounds it does not (a cell at the clamp stores Hi
// rounded up and reads it capped), plain and conservative updates, and
// first guesses that are right, low, high or absurd. Outlook.Value, from
// the same load, is what Query reads.
func TestOutlookFitsIn(t *testing.T) {
	// Every drain stays below core.SweepKeep (2^29 ms, 6.2 days): past
	// it the horizon sweep may re-stamp a cell, which FitsIn does
	// not foresee (its callers add the sweep's slack).
	laws := []struct {
		name string
		d    decay.Decay
		rate float64 // a linear law's, 0 for the others
	}{
		{"linear-1000/13", decay.Linear(1000.0 / 13), 1000.0 / 13},
		{"linear-0.3", decay.Linear(0.3), 0.3},
		{"linear-pi", decay.Linear(math.Pi), math.Pi},
		{"exp-0.01", decay.Exponential(0.01), 0},
		{"exp-1", decay.Exponential(1), 0},
	}
	his := []float64{100, 100.0 / 3, 1e6 + 0.1, 3e6}
	aggs := []core.Aggregator{core.Min, core.Max, core.Mean}
	checked := 0
	for li, law := range laws {
		for hi_, hi := range his {
			if law.rate > 0 && hi/law.rate*1000 >= float64(core.SweepKeep) {
				continue
			}
			for ai, agg := range aggs {
				for _, cons := range []bool{false, true} {
					if cons && agg != core.Min {
						continue // the conservative update takes Min
					}
					name := fmt.Sprintf("%s/hi=%v/agg=%d/cons=%v", law.name, hi, agg, cons)
					seed := uint64(li*1000 + hi_*100 + ai*10)
					if cons {
						seed++
					}
					checked += fitsInHistory(t, name, law.d, hi, agg, cons, seed)
				}
			}
		}
	}
	if checked < 1000 {
		t.Errorf("checked %d waits; want at least 1000", checked)
	}
}

func fitsInHistory(t *testing.T, name string, law decay.Decay, hi float64, agg core.Aggregator, cons bool, seed uint64) int {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 4, Decay: law, Hi: hi, Aggregator: agg, Seed: seed, Clock: clk, Conservative: cons})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0xF175))
	keys := []string{"a", "b", "c", "d", "e", "f"}
	checked := 0
	for step := range 120 {
		// Write some keys (they share cells), then let time pass.
		for range rng.IntN(4) {
			s.UpdateString(keys[rng.IntN(len(keys))], rng.Float64()*hi/float64(1+rng.IntN(8)))
		}
		clk.Advance(time.Duration(rng.IntN(5000)) * time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		d := rng.Float64() * hi
		if rng.IntN(4) == 0 {
			d = hi // the whole bound: fits only on an empty key
		}
		limit := hi
		var guess int64
		switch rng.IntN(4) {
		case 0:
			guess = 0
		case 1:
			guess = rng.Int64N(1 << 40) // absurdly high
		default:
			guess = rng.Int64N(200_000)
		}
		now := clk.NowMillis()
		o := s.OutlookString(k)
		if v, q := o.Value(), s.QueryString(k); v != q {
			t.Fatalf("%s step %d: Outlook(%q).Value() = %v, Query %v", name, step, k, v, q)
		}
		x := o.FitsIn(d, limit, guess)
		if x2 := o.FitsIn(d, limit, 0); x2 != x {
			t.Fatalf("%s step %d: FitsIn(%q, %v, %v) = %d from guess %d, %d from guess 0", name, step, k, d, limit, x, guess, x2)
		}
		if x < 0 {
			t.Fatalf("%s step %d: FitsIn(%q, %v, %v) = %d; every law here drains to 0", name, step, k, d, limit, x)
		}
		if x > 0 {
			clk.Set(now + x - 1)
			if s.TryUpdateString(k, d, limit) {
				t.Fatalf("%s step %d: FitsIn(%q, %v, %v) = %d, but TryUpdate admits at %d", name, step, k, d, limit, x, x-1)
			}
		}
		clk.Set(now + x)
		if !s.TryUpdateString(k, d, limit) {
			t.Fatalf("%s step %d: FitsIn(%q, %v, %v) = %d, but TryUpdate denies then (Query %v)", name, step, k, d, limit, x, s.QueryString(k))
		}
		checked++
	}
	return checked
}

// TestOutlookFitsInNever: a delta the law can never make room for (above
// the limit, under a law that keeps scores, or above limit - Lo with
// nothing stored) is -1; one that fits now is 0.
func TestOutlookFitsInNever(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	for _, c := range []struct {
		law          decay.Decay
		stored, d, l float64
		want         int64
	}{
		{decay.Linear(10), 0, 11, 10, -1},
		{decay.None(), 5, 6, 10, -1},
		{decay.None(), 5, 5, 10, 0},
		{decay.Linear(10), 5, 5, 10, 0},
		{decay.Linear(10), 5, 6, 10, 100}, // 1 of 5 drains in 100 ms
		{decay.Linear(1000), 100, 100, 100, 100},
	} {
		s, err := core.New(core.Config{Levels: 2, CellsPerLevel: 8, Decay: c.law, Hi: 100, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		s.UpdateString("k", c.stored)
		o := s.OutlookString("k")
		if got := o.FitsIn(c.d, c.l, 7); got != c.want {
			t.Errorf("%v: stored %v, FitsIn(d %v, limit %v) = %d; want %d", c.law, c.stored, c.d, c.l, got, c.want)
		}
	}
}
