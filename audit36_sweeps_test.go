package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit36FacadeNeverBelowTruthAcrossSweeps: the root grudge facade, a
// key updated once, then the fake clock advanced in steps of about 2^29
// ms (each step a horizon sweep when due, internal/core/horizon.go) and
// now and then an idle jump of 2^31 ms or more (the urgent re-base),
// with a Query (which runs the sweep) after each step. The estimate is
// never below the exact decay of the stored value (linear: the value
// minus rate x elapsed; exponential: value x e^(-lambda x elapsed)),
// up to 1e-12 relative for exponential's float64 exp. Reports how far
// above the truth it drifts (linear: in ms of drain).
func TestAudit36FacadeNeverBelowTruthAcrossSweeps(t *testing.T) {
	type lawCase struct {
		name  string
		d     grudge.Decay
		v     float64
		exact func(v float64, ms int64) float64
	}
	cases := []lawCase{
		{"linear5e-4", grudge.Linear(5e-4), 3000, func(v float64, ms int64) float64 { return max(v-5e-4*float64(ms)/1000, 0) }},
		{"linear1e-3", grudge.Linear(1e-3), 4321.5, func(v float64, ms int64) float64 { return max(v-1e-3*float64(ms)/1000, 0) }},
		{"linear0.37", grudge.Linear(0.37), 9e6, func(v float64, ms int64) float64 { return max(v-0.37*float64(ms)/1000, 0) }},
		{"exp1e-7", grudge.Exponential(1e-7), 1e6, func(v float64, ms int64) float64 { return v * math.Exp(-1e-7*float64(ms)/1000) }},
		{"exp3e-9", grudge.Exponential(3e-9), 123.456, func(v float64, ms int64) float64 { return v * math.Exp(-3e-9*float64(ms)/1000) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(36, uint64(len(c.name))))
			for trial := range 20 {
				clk := grudgetest.NewFakeClock()
				start := time.UnixMilli(1_780_000_000_000 + r.Int64N(1<<30))
				clk.Set(start)
				s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 256, Decay: c.d, Lo: 0, Hi: 1e9, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				key := []byte(fmt.Sprint("k", trial))
				// Written after a random part of the first interval.
				clk.Advance(time.Duration(r.Int64N(1<<30)) * time.Millisecond)
				t0 := clk.NowMillis()
				s.Update(key, c.v)
				f0 := s.Query(key)
				maxDrift, sweeps := 0.0, 0
				for step := range 40 {
					dt := int64(1)<<29 + r.Int64N(1<<16) - 1<<15
					if step%9 == 8 {
						dt = int64(1)<<31 + r.Int64N(1<<28) // idle jump
					}
					clk.Advance(time.Duration(dt) * time.Millisecond)
					got := s.Query(key)
					want := c.exact(f0, clk.NowMillis()-t0)
					sweeps++
					if got < want*(1-1e-12) {
						t.Fatalf("trial %d, step %d (%d ms after the write): Query = %.17g below the exact decay %.17g of the stored %.17g",
							trial, step, clk.NowMillis()-t0, got, want, f0)
					}
					if want > 0 {
						maxDrift = max(maxDrift, (got-want)/want)
					}
					if want == 0 && got != 0 {
						t.Fatalf("trial %d, step %d: Query = %v after the exact decay reached 0", trial, step, got)
					}
				}
				if trial == 0 {
					t.Logf("%d steps; largest relative excess over the exact decay %.3g", sweeps, maxDrift)
				}
			}
		})
	}
}
