package rotator

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a99T0 = int64(1_765_000_000_000) // a Unix-ms start for the fake clocks

func a99Rot(t testing.TB, clk *sketchtest.FakeClock, n uint32, p time.Duration) *Rotator {
	t.Helper()
	r, err := New(Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.None(), Seed: 99, Clock: clk},
		Generations: n, Period: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// a99Every returns the key's score in every live generation, oldest
// first, read at ms (no promotion).
func a99Every(r *Rotator, ms int64, key string) []float64 {
	gs := r.e.Current()
	at := r.e.Timebase().Time(ms)
	v := make([]float64, len(gs.Gens))
	for i, g := range gs.Gens {
		v[i] = g.QueryStringAt(at, key)
	}
	return v
}

// TestAudit99RotWindowExactMillis: the forgetting window at the
// millisecond (rotator/doc.go: "a write is gone from every generation at
// most N x Period after it was made", and a generation "becomes primary
// after N-1 periods of writes ... and retires one period later"; config.go:
// "A score lives at most Generations x Period after its last write").
// Deadlines sit on the grid New + j x Period (Period in whole ms rounded
// up), so a write at w is gone exactly at G = (the first deadline after
// w) + (N-1) x Period: in the primary at w + (N-1) x Period and at G - 1,
// gone from every generation at G, and G - w is in ((N-1)P, NP]. Checked
// for N = 2, 3, 17, Periods of 1 ms, 2.5 ms (3 ms), 7 ms and MaxInt64 ns
// (292 years), writes 1 ms before, at and 1 ms after a deadline, with the
// clock either read at every deadline (one promotion each) or jumping
// straight from the write to the read (one promotion of k periods).
func TestAudit99RotWindowExactMillis(t *testing.T) {
	for _, n := range []uint32{2, 3, 17} {
		for _, p := range []time.Duration{time.Millisecond, 2500 * time.Microsecond, 7 * time.Millisecond, math.MaxInt64} {
			pm := int64(p / time.Millisecond)
			if p%time.Millisecond != 0 {
				pm++
			}
			for _, off := range []int64{-1, 0, 1} {
				w := a99T0 + 2*pm + off              // 1 ms before, at, after the second deadline
				first := a99T0 + ((w-a99T0)/pm+1)*pm // the first deadline after w
				g := first + int64(n-1)*pm
				if d := g - w; d <= int64(n-1)*pm || d > int64(n)*pm {
					t.Fatalf("oracle: N=%d P=%v: G - w = %d ms outside ((N-1)P, NP]", n, p, d)
				}
				for _, target := range []int64{w + int64(n-1)*pm, g - 1, g, g + 3*int64(n)*pm} {
					for _, step := range []bool{false, true} {
						name := fmt.Sprintf("N=%d P=%v write at deadline%+d ms, read at G%+d ms, step=%v", n, p, off, target-g, step)
						clk := sketchtest.NewFakeClock()
						clk.Set(a99T0)
						r := a99Rot(t, clk, n, p)
						if step {
							for d := a99T0 + pm; d <= w; d += pm {
								clk.Set(d)
								r.QueryString("x")
							}
						}
						clk.Set(w)
						r.UpdateString("k", 1)
						if step {
							for d := first; d <= target; d += pm {
								clk.Set(d)
								r.QueryString("x")
							}
						}
						clk.Set(target)
						want := 1.0
						if target >= g {
							want = 0
						}
						if got := r.QueryString("k"); got != want {
							t.Fatalf("%s: Query %v, want %v", name, got, want)
						}
						if want == 0 {
							for i, v := range a99Every(r, target, "k") {
								if v != 0 {
									t.Fatalf("%s: generation %d of %d still reads %v at G", name, i, n, v)
								}
							}
						}
						// Exactly one promotion per deadline crossed.
						crossed := uint64((target - a99T0) / pm)
						if st := r.Stats(); st.Periods != crossed || (!step && st.Promotions > 2) {
							t.Fatalf("%s: Stats %+v, want %d periods", name, st, crossed)
						}
					}
				}
			}
		}
	}
}

// TestAudit99RotWindowBackwardsStep: a write made after the clock
// stepped back counts at the high-water mark (package sketch: "a clock
// step back counts as zero elapsed time"; doc.go: "a backwards step
// rotates nothing"), so its window is measured from the time already
// reached, not from the clock's reading: gone exactly N x Period after
// the high-water mark when that mark was on a deadline, still read 1 ms
// before. So on the clock's own scale a write can live (N + b) x Period
// for a step back of b Periods: "after it was made" is on the rotator's
// time scale.
func TestAudit99RotWindowBackwardsStep(t *testing.T) {
	for _, n := range []uint32{2, 4} {
		const pm = 10
		clk := sketchtest.NewFakeClock()
		clk.Set(a99T0)
		r := a99Rot(t, clk, n, pm*time.Millisecond)
		hw := a99T0 + 3*pm // on a deadline
		clk.Set(hw)
		r.QueryString("x")
		before := r.Stats()
		clk.Set(hw - 5*pm) // five Periods back
		r.UpdateString("k", 1)
		if st := r.Stats(); st != before {
			t.Fatalf("N=%d: a backwards step changed Stats %+v -> %+v", n, before, st)
		}
		g := hw + int64(n)*pm
		clk.Set(g - 1)
		if got := r.QueryString("k"); got != 1 {
			t.Fatalf("N=%d: Query %v at N x Period - 1 ms after the high-water mark, want 1", n, got)
		}
		clk.Set(g)
		if got := r.QueryString("k"); got != 0 {
			t.Fatalf("N=%d: Query %v at N x Period after the high-water mark, want 0", n, got)
		}
	}
}

// TestAudit99RotWindowMaxGenerations: Generations at its maximum (1024,
// config.go) and a 1 ms Period: a write at New reads in full after one
// promotion of 1023 periods (1023 ms, (N-1) x Period) and is gone from
// every generation at 1024 ms (N x Period), one more promotion of one
// period; Stats count 2 promotions, 1024 periods and 1024 + 1023 + 1
// sketches.
func TestAudit99RotWindowMaxGenerations(t *testing.T) {
	const n = 1024
	clk := sketchtest.NewFakeClock()
	clk.Set(a99T0)
	r := a99Rot(t, clk, n, time.Millisecond)
	r.UpdateString("k", 3)
	clk.Set(a99T0 + n - 1)
	if got := r.QueryString("k"); got != 3 {
		t.Fatalf("at (N-1) x Period: Query %v, want 3", got)
	}
	clk.Set(a99T0 + n)
	if got := r.QueryString("k"); got != 0 {
		t.Fatalf("at N x Period: Query %v, want 0", got)
	}
	for i, v := range a99Every(r, a99T0+n, "k") {
		if v != 0 {
			t.Fatalf("at N x Period: generation %d reads %v", i, v)
		}
	}
	if st := r.Stats(); st.Promotions != 2 || st.Periods != n || st.Allocated != 2*n {
		t.Fatalf("Stats %+v, want 2 promotions, %d periods, %d sketches", st, n, 2*n)
	}
}
