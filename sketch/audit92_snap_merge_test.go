package sketch_test

// Audit 92 (snapshots, merge, restore): Merge of restored sketches.
//
// Contract: Sketch.Merge ("adds other into s under the additive law,
// cell by cell, both decayed to s's current time: exact for the None and
// Exponential laws"; "It refuses (ErrSnapshotMismatch) a sketch of
// another configuration, or s itself"), the engine's Merge doc ("None
// and Exponential: ... exactly the cell a single sketch fed the union
// would hold, up to the float32 rounding (upward, one ulp per cell per
// merge)"), docs/snapshots.md "Merge" (the exactness table), and
// UnmarshalBinary ("every score aged by the time since it was taken").
// Earlier audits merged live replicas (37, 39, 49, 55, 88); these merge
// replicas that went through a snapshot and a downtime, and merge two
// restores of one snapshot taken at the same instant.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a92MergeT0 = int64(1_795_000_000_000)

type a92Write struct {
	key string
	v   float64
	at  int64 // ms after a92MergeT0
}

func a92MergeCfg(d decay.Decay, c sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 2, CellsPerLevel: 4096, Decay: d, Lo: 0, Hi: 1e6, Seed: 11, Clock: c}
}

// a92Replica builds a sketch on its own fake clock and applies ws in
// order, moving its clock to each write's time.
func a92Replica(t *testing.T, d decay.Decay, ws []a92Write) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(a92MergeT0)
	s := mustNewSketch(t, a92MergeCfg(d, c))
	for _, w := range ws {
		c.Set(a92MergeT0 + w.at)
		s.UpdateString(w.key, w.v)
	}
	return s, c
}

// a92Union is the exact union truth of key at at ms after T0.
func a92Union(lambda float64, key string, at int64, streams ...[]a92Write) float64 {
	sum := 0.0
	for _, ws := range streams {
		for _, w := range ws {
			if w.key == key && w.at <= at {
				sum += w.v * math.Exp(-lambda*float64(at-w.at)/1000)
			}
		}
	}
	return sum
}

func a92Streams() (a, b, c []a92Write) {
	for i := range 12 {
		k := fmt.Sprint("key", i%6)
		a = append(a, a92Write{k, float64(1 + i%5), int64(i) * 37})
		b = append(b, a92Write{k, float64(2 + i%3), 5 + int64(i)*53})
		c = append(c, a92Write{fmt.Sprint("key", (i+2)%7), float64(1 + i%4), 11 + int64(i)*29})
	}
	return
}

// a92Restore saves s and restores it into a new sketch on a fresh clock
// at wall ms a92MergeT0+at.
func a92Restore(t *testing.T, s *sketch.Sketch, d decay.Decay, at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	c := sketchtest.NewFakeClock()
	c.Set(a92MergeT0 + at - 7*3600_000) // another process, started earlier
	r := mustNewSketch(t, a92MergeCfg(d, c))
	c.Set(a92MergeT0 + at)
	if _, err := r.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	return r, c
}

// TestAudit92SnapMergeRestoredReplicasEqualUnion: replicas A and B saw
// disjoint streams; B is saved at the end of its stream and restored in
// another process after a downtime (0, 1 ms, 2 s, 1 h, 3 days); A is
// read at the restore instant and B's restore is merged into it. Under
// None every key reads exactly the union (integer deltas); under
// Exponential never below the union's exact value and within a few
// float32 ulps of it. Then the merged sketch itself is saved and restored
// 9 days later (past 2^29 ms): still never below the union decayed that
// long, within a few ulps.
func TestAudit92SnapMergeRestoredReplicasEqualUnion(t *testing.T) {
	sa, sb, _ := a92Streams()
	for _, lambda := range []float64{0, 0.05} {
		d := decay.None()
		if lambda > 0 {
			d = decay.Exponential(lambda)
		}
		for _, down := range []int64{0, 1, 2000, 3600_000, 3 * 86_400_000} {
			name := fmt.Sprintf("lambda=%v/down=%dms", lambda, down)
			a, ca := a92Replica(t, d, sa)
			b, _ := a92Replica(t, d, sb)
			end := int64(700)
			rb, _ := a92Restore(t, b, d, end+down)
			ca.Set(a92MergeT0 + end + down)
			if err := a.Merge(rb); err != nil {
				t.Fatalf("%s: Merge: %v", name, err)
			}
			checkAt := func(stage string, s *sketch.Sketch, at int64) {
				t.Helper()
				for i := range 6 {
					k := fmt.Sprint("key", i)
					got, want := s.QueryString(k), a92Union(lambda, k, at, sa, sb)
					if lambda == 0 {
						if got != want {
							t.Errorf("%s %s: %s reads %v, union %v (None: want equal)", name, stage, k, got, want)
						}
						continue
					}
					if got < want*(1-1e-12) || got > want*(1+1e-6)+3e-45 {
						t.Errorf("%s %s: %s reads %v, union %v (want at or above it, within a few float32 ulps)", name, stage, k, got, want)
					}
				}
			}
			checkAt("merged", a, end+down)
			later := end + down + 9*86_400_000
			ra, _ := a92Restore(t, a, d, later)
			checkAt("merged, saved, restored 9 days later", ra, later)
		}
	}
}

// TestAudit92SnapMergeTwoRestoresOfOneSnapshot: one snapshot restored
// into two sketches on two clocks at the same instant (the snapshots of
// two replicas taken at the same instant, the degenerate case: the same
// replica twice), then one merged into the other: every key reads twice
// the other restore's reading (a + a, rounded up at most one float32
// ulp), for None, Exponential and Linear (non-negative scores: the
// additive merge). A merge of a sketch into itself is refused with
// ErrSnapshotMismatch and changes nothing.
func TestAudit92SnapMergeTwoRestoresOfOneSnapshot(t *testing.T) {
	sa, _, _ := a92Streams()
	for _, lw := range []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(0.3)}, {"linear", decay.Linear(0.5)}} {
		for _, down := range []int64{0, 1500, 86_400_000 * 7} {
			name := fmt.Sprintf("%s/down=%dms", lw.name, down)
			src, _ := a92Replica(t, lw.d, sa)
			r1, _ := a92Restore(t, src, lw.d, 500+down)
			r2, _ := a92Restore(t, src, lw.d, 500+down)
			before := make([]float64, 6)
			for i := range before {
				before[i] = r1.QueryString(fmt.Sprint("key", i))
			}
			if err := r1.Merge(r1); !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("%s: Merge of a sketch into itself: %v, want ErrSnapshotMismatch", name, err)
			}
			for i := range before {
				if g := r1.QueryString(fmt.Sprint("key", i)); g != before[i] {
					t.Fatalf("%s: a refused self-merge changed key%d: %v, was %v", name, i, g, before[i])
				}
			}
			if err := r1.Merge(r2); err != nil {
				t.Fatalf("%s: Merge: %v", name, err)
			}
			for i := range before {
				k := fmt.Sprint("key", i)
				got, one := r1.QueryString(k), r2.QueryString(k)
				if one != before[i] {
					t.Fatalf("%s: Merge changed the other sketch's %s: %v, was %v", name, k, one, before[i])
				}
				if got < 2*one || got > 2*one*(1+1.0/(1<<22)) {
					t.Errorf("%s: %s reads %v after merging two restores reading %v (want 2x, rounded up at most an ulp)", name, k, got, one)
				}
			}
		}
	}
}

// TestAudit92SnapMergeGroupingNoneExact: three replicas on three clocks
// (aligned), each saved and restored after a different downtime, merged
// in every order and grouping ((A+B)+C, (B+C)+A, (C+A)+B, A+(B+C) by
// merging B+C first): under None with integer deltas every grouping
// reads exactly the union, so the results agree key by key. Under
// Exponential every grouping is at or above the union and within a few
// float32 ulps of it (the doc bounds each merge by one ulp per cell, so
// the groupings may differ in the last ulps, never below the union).
func TestAudit92SnapMergeGroupingNoneExact(t *testing.T) {
	sa, sb, sc := a92Streams()
	at := int64(4000)
	for _, lambda := range []float64{0, 0.2} {
		d := decay.None()
		if lambda > 0 {
			d = decay.Exponential(lambda)
		}
		fresh := func() [3]*sketch.Sketch {
			a, _ := a92Replica(t, d, sa)
			b, _ := a92Replica(t, d, sb)
			c, _ := a92Replica(t, d, sc)
			ra, _ := a92Restore(t, a, d, at)
			rb, _ := a92Restore(t, b, d, at)
			rc, _ := a92Restore(t, c, d, at)
			return [3]*sketch.Sketch{ra, rb, rc}
		}
		orders := [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}}
		for _, o := range orders {
			for _, nested := range []bool{false, true} {
				s := fresh()
				var res *sketch.Sketch
				if nested { // x + (y + z)
					if err := s[o[1]].Merge(s[o[2]]); err != nil {
						t.Fatal(err)
					}
					if err := s[o[0]].Merge(s[o[1]]); err != nil {
						t.Fatal(err)
					}
				} else { // (x + y) + z
					if err := s[o[0]].Merge(s[o[1]]); err != nil {
						t.Fatal(err)
					}
					if err := s[o[0]].Merge(s[o[2]]); err != nil {
						t.Fatal(err)
					}
				}
				res = s[o[0]]
				for i := range 7 {
					k := fmt.Sprint("key", i)
					got, want := res.QueryString(k), a92Union(lambda, k, at, sa, sb, sc)
					if lambda == 0 && got != want {
						t.Errorf("None order %v nested %v: %s reads %v, union %v", o, nested, k, got, want)
					}
					if lambda > 0 && (got < want*(1-1e-12) || got > want*(1+1e-6)) {
						t.Errorf("Exp order %v nested %v: %s reads %v, union %v", o, nested, k, got, want)
					}
				}
			}
		}
	}
}

// TestAudit92SnapMergeSkewedRestoreNeverBelow: B saved at the end of its
// stream and restored on a clock ahead of A's (1 ms to 30 days: the
// restore counts that as downtime, docs/snapshots.md "Time across
// restarts"), or A's clock ahead of B's restore by as much, then B's
// restore merged into A: no key reads below A's own value plus B's value
// on B's restoring clock (when B is ahead, the merge reads B's cells back
// to A's instant by the law's inverse: an over-estimate, never less; when
// A is ahead, B's cells decay A's extra time). Past 2^29 ms of downtime
// B's cells are decayed once and stamped at the restore, so this crosses
// both restore paths and the merge's read-back over more than 2^31 ms.
func TestAudit92SnapMergeSkewedRestoreNeverBelow(t *testing.T) {
	sa, sb, _ := a92Streams()
	for _, lambda := range []float64{0, 1e-6, 0.3} {
		d := decay.None()
		if lambda > 0 {
			d = decay.Exponential(lambda)
		}
		for _, skew := range []int64{-30 * 86_400_000, -3600_000, -1, 1, 5000, 26 * 86_400_000, 30 * 86_400_000} {
			name := fmt.Sprintf("lambda=%v/skew=%v", lambda, time.Duration(skew)*time.Millisecond)
			a, ca := a92Replica(t, d, sa)
			b, _ := a92Replica(t, d, sb)
			end := int64(800)
			bAt := end + max(skew, 0) // B's restoring clock
			rb, _ := a92Restore(t, b, d, bAt)
			aNow := end + max(-skew, 0)
			ca.Set(a92MergeT0 + aNow)
			if err := a.Merge(rb); err != nil {
				t.Fatalf("%s: Merge: %v", name, err)
			}
			for i := range 6 {
				k := fmt.Sprint("key", i)
				want := a92Union(lambda, k, aNow, sa) + a92Union(lambda, k, max(aNow, bAt), sb)
				got := a.QueryString(k)
				if got < want*(1-1e-12) {
					t.Errorf("%s: %s reads %v, below A's value plus B's restored value, %v", name, k, got, want)
				}
				if skew < 0 && got > want*(1+1e-6)+3e-45 {
					// A ahead: B's cells decay the difference, exactly.
					t.Errorf("%s: %s reads %v, above A's value plus B's decayed value, %v", name, k, got, want)
				}
			}
		}
	}
}

// TestAudit92SnapMergeOverlapEdges: Sketch.Merge's overlap under Linear
// ("raises every cell by rate x overlap (overlap rounded up to whole
// ms ...)"): a zero overlap merges as Merge(other), and an overlap of
// years saturates every cell at Hi, cold keys included (clamped, never
// Inf or NaN); a negative overlap and two overlaps panic with a "sketch:"
// message (a negative one merged as none until stop 63: audit 125, a
// sign slip under Linear is the under-reading the overlap prevents).
// Under None and Exponential any non-negative overlap is ignored.
func TestAudit92SnapMergeOverlapEdges(t *testing.T) {
	sa, sb, _ := a92Streams()
	for _, lw := range []struct {
		name   string
		d      decay.Decay
		linear bool
	}{{"none", decay.None(), false}, {"exp", decay.Exponential(0.3), false}, {"linear", decay.Linear(2), true}} {
		merged := func(overlap ...time.Duration) *sketch.Sketch {
			a, _ := a92Replica(t, lw.d, sa)
			b, _ := a92Replica(t, lw.d, sb)
			if err := a.Merge(b, overlap...); err != nil {
				t.Fatal(err)
			}
			return a
		}
		plain := merged()
		for _, ov := range []time.Duration{-time.Nanosecond, -time.Hour, math.MinInt64} {
			func() {
				defer func() {
					msg, _ := recover().(string)
					if len(msg) < 7 || msg[:7] != "sketch:" {
						t.Errorf("%s: Merge(other, %v): panic %q, want one starting \"sketch:\"", lw.name, ov, msg)
					}
				}()
				merged(ov)
			}()
		}
		for _, ov := range []time.Duration{0} {
			m := merged(ov)
			for i := range 8 {
				k := fmt.Sprint("key", i)
				if g, w := m.QueryString(k), plain.QueryString(k); g != w {
					t.Errorf("%s: Merge(other, %v): %s reads %v, Merge(other) %v", lw.name, ov, k, g, w)
				}
			}
		}
		huge := merged(math.MaxInt64)
		for i := range 8 {
			k := fmt.Sprint("key", i)
			g := huge.QueryString(k)
			if lw.linear && g != 1e6 {
				t.Errorf("%s: Merge(other, MaxInt64): %s reads %v, want Hi 1e6", lw.name, k, g)
			}
			if !lw.linear && g != plain.QueryString(k) {
				t.Errorf("%s: Merge(other, MaxInt64): %s reads %v, Merge(other) %v (overlap ignored)", lw.name, k, g, plain.QueryString(k))
			}
		}
		func() {
			defer func() {
				msg, _ := recover().(string)
				if len(msg) < 7 || msg[:7] != "sketch:" {
					t.Errorf("%s: Merge with two overlaps: panic %q, want one starting \"sketch:\"", lw.name, msg)
				}
			}()
			merged(time.Second, time.Second)
		}()
	}
}
