package rotator_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a87T0 = time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)

func a87Rot(t testing.TB, clk sketch.Clock, d decay.Decay, n uint32, m uint32, period time.Duration) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: m, Hi: 1e9, Decay: d, Seed: 87, Clock: clk},
		Generations: n, Period: period,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit87RotAtFormsFarAheadBehind: the explicit-time forms of the
// rotator (time first) with times far from the clock. A time ahead of the
// clock counts as the clock's reading (Timebase: "a time in the future
// cannot move the sketch ahead of its clock"), so it neither rotates nor
// decays past the clock; a time behind the last one used counts as that
// time ("a backwards clock step counts as zero elapsed time", and
// "a backwards step rotates nothing"); a time between the last one used
// and the clock is used as given, so the key written at 1.5 P is read
// until 3P - 1 ms and is gone at 3P exactly (N = 2), even with the clock
// already past 3P.
func TestAudit87RotAtFormsFarAheadBehind(t *testing.T) {
	const P = time.Second
	clk := sketchtest.NewFakeClock()
	clk.SetTime(a87T0)
	r := a87Rot(t, clk, decay.None(), 2, 1<<12, P)
	ahead := []time.Time{a87T0.Add(10 * P), a87T0.Add(1000 * time.Hour), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0)}
	behind := []time.Time{a87T0.Add(-P), time.Time{}, time.Unix(-1<<62, 0), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i, at := range ahead {
		r.UpdateAt(at, "a", 1)
		if got := r.QueryAt(at, "a"); got != float64(i+1) {
			t.Fatalf("ahead %v: QueryAt = %v, want %d", at, got, i+1)
		}
		if st := r.Stats(); st.Periods != 0 {
			t.Fatalf("ahead %v: %d periods rotated with the clock at New's time", at, st.Periods)
		}
	}
	clk.SetTime(a87T0.Add(P + P/2))
	for i, at := range behind {
		if got := r.UpdateAndQueryAt(at, "b", 2); got != float64(2*(i+1)) {
			t.Fatalf("behind %v: UpdateAndQueryAt = %v, want %d", at, got, 2*(i+1))
		}
	}
	// Every time behind the mark (T0: the times ahead were capped at the
	// clock, then at T0) counts as T0: "b" was written at T0, and no
	// period is over for the rotator until an operation uses a later time.
	if st := r.Stats(); st.Periods != 0 {
		t.Fatalf("times behind the mark rotated %d periods", st.Periods)
	}
	if got := r.QueryString("a"); got != 4 {
		t.Fatalf("at 1.5 P: Query(a) = %v, want 4 (written at T0, N = 2)", got)
	}
	// The short form above used the clock (1.5 P): one period rotated;
	// "c" is written there.
	r.UpdateString("c", 3)
	if st := r.Stats(); st.Periods != 1 {
		t.Fatalf("at 1.5 P: %d periods, want 1", st.Periods)
	}
	clk.SetTime(a87T0.Add(5 * P))
	if got := r.QueryAt(a87T0.Add(2*P-time.Millisecond), "a"); got != 4 {
		t.Fatalf("at 2P - 1ms: Query(a) = %v, want 4", got)
	}
	if got := r.QueryAt(a87T0.Add(2*P), "a"); got != 0 {
		t.Fatalf("at 2P: Query(a) = %v, want 0 (written at T0, N = 2)", got)
	}
	if got := r.QueryAt(a87T0.Add(3*P-time.Millisecond), "c"); got != 3 {
		t.Fatalf("at 3P - 1ms: Query(c) = %v, want 3 (written at 1.5 P)", got)
	}
	if got := r.QueryAt(a87T0.Add(2*P), "c"); got != 3 {
		t.Fatalf("a time behind the mark: Query(c) = %v, want 3", got)
	}
	if got := r.QueryAt(a87T0.Add(3*P), "c"); got != 0 {
		t.Fatalf("at 3P: Query(c) = %v, want 0 (written at 1.5 P, N = 2)", got)
	}
	if st := r.Stats(); st.Periods != 3 {
		t.Fatalf("at 3P: %d periods, want 3", st.Periods)
	}
	if !r.TryUpdateAt(a87T0.Add(100*P), "d", 5, 5) || r.TryUpdateAt(a87T0.Add(100*P), "d", 1, 5) {
		t.Fatal("TryUpdateAt far ahead: want 0+5 <= 5 admitted, 5+1 denied")
	}
	if st := r.Stats(); st.Periods != 5 {
		t.Fatalf("TryUpdateAt far ahead with the clock at 5P: %d periods, want 5 (capped at the clock)", st.Periods)
	}
	if got := r.QueryString("d"); got != 5 {
		t.Fatalf("Query(d) = %v, want 5", got)
	}
}

// TestAudit87RotAtFormsMatchShort: two rotators of one Config (same Seed)
// on two fake clocks moved alike (sub-millisecond steps included, and
// steps back), one driven by the short forms, the other by the At forms
// given its clock's Now(): "the short forms are the explicit ones at the
// clock's now", so every reading, decision and rotation count agrees
// exactly, across many rotations (N = 3, Period 20 ms, Exponential and
// Linear, colliding keys).
func TestAudit87RotAtFormsMatchShort(t *testing.T) {
	for _, law := range []decay.Decay{decay.Exponential(3), decay.Linear(700), decay.None()} {
		c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		c1.SetTime(a87T0)
		c2.SetTime(a87T0)
		short, at := a87Rot(t, c1, law, 3, 16, 20*time.Millisecond), a87Rot(t, c2, law, 3, 16, 20*time.Millisecond)
		rng := rand.New(rand.NewPCG(87, 1))
		for i := range 3000 {
			var d time.Duration
			switch rng.IntN(8) {
			case 0:
				d = -time.Duration(rng.IntN(30)) * time.Millisecond
			case 1:
				d = time.Duration(rng.IntN(100)) * time.Millisecond
			default:
				d = time.Duration(rng.IntN(1500)) * time.Microsecond
			}
			c1.Advance(d)
			c2.Advance(d)
			k := fmt.Sprintf("k%d", rng.IntN(40))
			v := float64(1 + rng.IntN(9))
			now := c2.Now()
			switch rng.IntN(4) {
			case 0:
				short.UpdateString(k, v)
				at.UpdateAt(now, k, v)
			case 1:
				a, b := short.QueryString(k), at.QueryAt(now, k)
				if a != b {
					t.Fatalf("%v op %d: QueryString %v, QueryAt(Now()) %v", law, i, a, b)
				}
			case 2:
				a, b := short.UpdateAndQueryString(k, v), at.UpdateAndQueryAt(now, k, v)
				if a != b {
					t.Fatalf("%v op %d: UpdateAndQueryString %v, UpdateAndQueryAt(Now()) %v", law, i, a, b)
				}
			case 3:
				limit := float64(rng.IntN(60))
				a, b := short.TryUpdateString(k, v, limit), at.TryUpdateAt(now, k, v, limit)
				if a != b {
					t.Fatalf("%v op %d: TryUpdateString %v, TryUpdateAt(Now()) %v", law, i, a, b)
				}
			}
			if short.Stats() != at.Stats() {
				t.Fatalf("%v op %d: stats %+v (short) vs %+v (At)", law, i, short.Stats(), at.Stats())
			}
		}
		if st := short.Stats(); st.Periods < 50 {
			t.Fatalf("%v: only %d periods", law, st.Periods)
		}
	}
}

// TestAudit87RotStatsAllocated: Stats' Allocated is "the number of
// sketches built, the N built by New included", and "a forward clock jump
// of k periods is one promotion of O(N) work": a jump of k periods
// builds min(k, N) generations (the k oldest retire, N-len(kept) fresh
// ones join), counted in one Promotion and k Periods; a step back builds
// nothing. The At forms count the same.
func TestAudit87RotStatsAllocated(t *testing.T) {
	const P = 50 * time.Millisecond
	clk := sketchtest.NewFakeClock()
	clk.SetTime(a87T0)
	r := a87Rot(t, clk, decay.None(), 3, 64, P)
	want := rotator.Stats{Allocated: 3}
	step := func(what string, now time.Time, k uint64, at bool) {
		t.Helper()
		if at {
			r.QueryAt(now, "x")
		} else {
			clk.SetTime(now)
			r.QueryString("x")
		}
		if k > 0 {
			want.Promotions++
			want.Periods += k
			want.Allocated += min(k, 3)
		}
		if got := r.Stats(); got != want {
			t.Fatalf("%s: stats %+v, want %+v", what, got, want)
		}
	}
	step("0.9 P", a87T0.Add(45*time.Millisecond), 0, false)
	step("1 P", a87T0.Add(P), 1, false)
	step("3.5 P", a87T0.Add(3*P+P/2), 2, false)
	step("back to 2 P", a87T0.Add(2*P), 0, false)
	step("3.9 P", a87T0.Add(3*P+45*time.Millisecond), 0, false)
	step("103 P", a87T0.Add(103*P), 100, false)
	clk.SetTime(a87T0.Add(1000 * P))
	step("At 105 P", a87T0.Add(105*P), 2, true)
	step("At 104 P", a87T0.Add(104*P), 0, true)
	step("At 2000 P (capped at the clock, 1000 P)", a87T0.Add(2000*P), 895, true)
}
