package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit39MergeAheadNeverBelowUnion: replica B's clock is ahead of
// A's by a skew from 1 ms to 6 h (past maxAhead, 2^24 ms); B sees
// non-negative writes spread over its last stretch (all stamped after the
// merge instant on B's scale), A sees its own. After A.Merge(B) (and
// MergeWithin for Linear) every key reads at or above its union truth on
// the absolute timeline, now and later, and every reading is finite and
// within [Lo, Hi] (laws fast enough that undecay overflows to +Inf,
// Hi clamps, Lo < 0).
func TestAudit39MergeAheadNeverBelowUnion(t *testing.T) {
	type lw struct {
		name string
		law  decay.Decay
		kind int // 0 none, 1 exp, 2 linear
		p    float64
	}
	laws := []lw{
		{"none", decay.None(), 0, 0},
		{"exp0.3", decay.Exponential(0.3), 1, 0.3},
		{"exp1e-9", decay.Exponential(1e-9), 1, 1e-9},
		{"exp50", decay.Exponential(50), 1, 50},
		{"exp1e4", decay.Exponential(1e4), 1, 1e4},
		{"lin5", decay.Linear(5), 2, 5},
		{"lin4093000", decay.Linear(4093000), 2, 4093000},
	}
	skews := []int64{1, 7, 3000, 1 << 20, 1<<24 - 1, 1 << 24, 1<<24 + 5000, 6 * 3600 * 1000}
	rng := rand.New(rand.NewPCG(39, 2))
	for _, L := range laws {
		for _, skew := range skews {
			for _, hi := range []float64{1e6, 50, math.MaxFloat32} {
				for _, lo := range []float64{0, -20} {
					name := fmt.Sprintf("%s/skew%d/hi%g/lo%g", L.name, skew, hi, lo)
					base := int64(1_700_000_000_000)
					ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
					ca.Set(base)
					cb.Set(base + skew)
					cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: L.law, Lo: lo, Hi: hi, Seed: 3}
					cfg.Clock = ca
					a := mustNewSketch(t, cfg)
					cfg.Clock = cb
					b := mustNewSketch(t, cfg)
					type ev struct {
						at int64 // absolute (A's scale)
						d  float64
					}
					truth := map[string][]ev{}
					// Writes over the last min(skew, 5000) ms of both
					// clocks, both replicas advancing together.
					span := min(skew, 5000)
					ca.Set(base - span)
					cb.Set(base + skew - span)
					for ca.NowMillis() < base {
						k := fmt.Sprintf("k%d", rng.IntN(6))
						d := float64(rng.IntN(9))
						if rng.IntN(2) == 0 {
							b.UpdateString(k, d)
						} else {
							a.UpdateString(k, d)
						}
						truth[k] = append(truth[k], ev{ca.NowMillis(), d})
						adv := 1 + rng.Int64N(max(1, span/20))
						ca.Set(ca.NowMillis() + adv)
						cb.Set(cb.NowMillis() + adv)
					}
					ca.Set(base)
					cb.Set(base + skew)
					var err error
					if L.kind == 2 && rng.IntN(2) == 0 {
						err = a.Merge(b, time.Duration(span)*time.Millisecond)
					} else {
						err = a.Merge(b)
					}
					if err != nil {
						t.Fatal(err)
					}
					for _, later := range []int64{0, 1, 100, 3000, 60_000} {
						ca.Set(base + later)
						T := base + later
						for k, evs := range truth {
							// the union of non-negative writes, one sketch
							want := 0.0
							last := int64(0)
							for i, e := range evs {
								if i > 0 {
									want = decayTo(L.kind, L.p, want, e.at-last)
								}
								want = min(want+e.d, hi)
								last = e.at
							}
							want = decayTo(L.kind, L.p, want, T-last)
							got := a.QueryString(k)
							if math.IsNaN(got) || math.IsInf(got, 0) || got > hi || got < lo {
								t.Fatalf("%s +%d: Query(%s) = %v, not finite within [Lo, Hi]", name, later, k, got)
							}
							if got < want*(1-1e-9)-1e-9 {
								t.Errorf("%s +%dms: Query(%s) = %v < union truth %v", name, later, k, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func decayTo(kind int, p, v float64, dt int64) float64 {
	switch kind {
	case 1:
		return v * math.Exp(-p*float64(dt)/1000)
	case 2:
		return max(v-p*float64(dt)/1000, 0)
	}
	return v
}
