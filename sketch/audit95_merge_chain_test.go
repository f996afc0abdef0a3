package sketch_test

// Audit 95: Merge's result fed again into a second Merge and into
// WriteTo/restore (a chain: A.Merge(B); C.Merge(A); C.WriteTo; restore
// R), with replicas on skewed clocks (behind and ahead), writes landing
// on the other sketch during each merge and on C during the encode,
// writes clamped at Hi, every provided law (Linear through MergeWithin
// with an overlap covering the whole history). A reference sketch U on
// one clock is fed every write (the union).
// Clock labels are the times (as Merge maps them: docs/snapshots.md
// "Merge"). Checked past every stamp:
//   - R never above Hi;
//   - non-negative deltas: R at or above each input (A after both
//     merges, B, and a twin of C fed C's own writes): merge.go "never
//     below either input's truth", sketch.go "Writes that land on either
//     sketch during the merge are on the safe side for positive scores";
//   - None and Exponential, where U never reached Hi ("up to ... the
//     clamp at Hi"): R at or above U (merge.go "exactly the cell a
//     single sketch fed the union would hold, up to the float32
//     rounding (upward ...)"), and at most U raised by 3 ms of the law
//     (a whole-ms Hi stamp per merge and one per restate) and float32
//     rounding;
//   - Linear, MergeWithin, U never at Hi: R at or above U (merge.go
//     MergeWithin: "every merged cell is at or above the cell a single
//     sketch fed the union of both streams would hold");
//   - TryUpdate on R decides aggregate + delta <= limit (API.md): denied
//     at Query + 1 less a hair, admitted at Query + 1, after which the
//     key reads at least min(Query + 1, Hi).
//
// Fixed seed (math/rand/v2 PCG); fake clocks; hooks run the writes
// during the merges and the encode deterministically.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a95ChainWrite struct {
	at  int64 // label (ms after a93T)
	key string
	v   float64
}

func TestAudit95MergeChainRestoreNeverBelow(t *testing.T) {
	laws := []struct {
		name   string
		d      decay.Decay
		lambda float64 // Exponential's, for the upper bound; 0 otherwise
		lin    bool
	}{
		{"none", decay.None(), 0, false},
		{"exp1", decay.Exponential(1), 1, false},
		{"exp0.2", decay.Exponential(0.2), 0.2, false},
		{"lin10", decay.Linear(10), 0, true},
	}
	const hi = 50.0
	keys := []string{"k0", "k1", "k2", "k3"}
	skews := []int64{-700, -3, 0, 5, 600}
	vals := []float64{1, 4, 9, 20, 60}
	rng := rand.New(rand.NewPCG(95, 4))
	n := 0
	for _, lw := range laws {
		for iter := 0; iter < 40; iter++ {
			n++
			sB, sA := skews[rng.IntN(len(skews))], skews[rng.IntN(len(skews))]
			hB, hA, hC := []int64{0, 0, 40}[rng.IntN(3)], []int64{0, 0, 40}[rng.IntN(3)], []int64{0, 0, 25}[rng.IntN(3)]
			down := []int64{0, 2000}[rng.IntN(2)]
			big := rng.IntN(2) == 0
			pick := func() float64 {
				if big {
					return vals[rng.IntN(len(vals))]
				}
				return vals[rng.IntN(2)]
			}
			gen := func(end int64) []a95ChainWrite {
				var ws []a95ChainWrite
				for range 1 + rng.IntN(5) {
					ws = append(ws, a95ChainWrite{end - rng.Int64N(3000), keys[rng.IntN(len(keys))], pick()})
				}
				sort.SliceStable(ws, func(i, j int) bool { return ws[i].at < ws[j].at })
				return ws
			}
			// merge 1 at A's label 0 (B's label sB); merge 2 at C's
			// label 1000 (A's label 1000+sA); the encode at C's 1000.
			wa, wb, wc := gen(0), gen(sB), gen(1000)
			hookB := a95ChainWrite{sB + hB, keys[rng.IntN(len(keys))], pick()}
			hookA := a95ChainWrite{1000 + sA + hA, keys[rng.IntN(len(keys))], pick()}
			hookC := a95ChainWrite{1000 + hC, keys[rng.IntN(len(keys))], pick()}
			name := fmt.Sprintf("%s/%d/sB=%d/sA=%d/hB=%d/hA=%d/hC=%d/down=%d", lw.name, iter, sB, sA, hB, hA, hC, down)
			a95ChainCase(t, name, lw.d, lw.lambda, lw.lin, hi, keys, wa, wb, wc, hookB, hookA, hookC, sB, sA, down)
		}
	}
	if n < 100 {
		t.Fatalf("only %d cases", n)
	}
}

func a95ChainCase(t *testing.T, name string, d decay.Decay, lambda float64, lin bool, hi float64, keys []string,
	wa, wb, wc []a95ChainWrite, hookB, hookA, hookC a95ChainWrite, sB, sA, down int64) {
	t.Helper()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 1024, Decay: d, Lo: 0, Hi: hi, Seed: 7}
	const start = -5000 // every sketch is created at this label
	mk := func(c sketch.Clock) *sketch.Sketch {
		cfg.Clock = c
		return mustNewSketch(t, cfg)
	}
	feed := func(s *sketch.Sketch, c *sketchtest.FakeClock, ws []a95ChainWrite) {
		for _, w := range ws {
			c.Set(a93T + w.at)
			s.UpdateString(w.key, w.v)
		}
	}
	var overlap time.Duration
	if lin {
		overlap = 10 * time.Second // covers the whole history
	}
	ca := &a88negHookClock{FakeClock: sketchtest.NewFakeClock()}
	cb := &a88negHookClock{FakeClock: sketchtest.NewFakeClock()}
	cc, ctw := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	for _, c := range []*sketchtest.FakeClock{ca.FakeClock, cb.FakeClock, cc, ctw} {
		c.Set(a93T + start)
	}
	a, b, c, twin := mk(ca), mk(cb), mk(cc), mk(ctw)
	feed(a, ca.FakeClock, wa)
	feed(b, cb.FakeClock, wb)
	feed(c, cc, wc)
	feed(twin, ctw, wc)

	// Merge 1: A at label 0, B at sB; a write lands on B during it.
	ca.Set(a93T)
	cb.Set(a93T + sB)
	cb.arm(func() {
		cb.Set(a93T + hookB.at)
		b.UpdateString(hookB.key, hookB.v)
	})
	if err := a.Merge(b, overlap); err != nil {
		t.Fatalf("%s: merge 1: %v", name, err)
	}
	// Merge 2: C at label 1000, A at 1000+sA; a write lands on A.
	cc.Set(a93T + 1000)
	ca.Set(a93T + 1000 + sA)
	ca.arm(func() {
		ca.Set(a93T + hookA.at)
		a.UpdateString(hookA.key, hookA.v)
	})
	if err := c.Merge(a, overlap); err != nil {
		t.Fatalf("%s: merge 2: %v", name, err)
	}
	// The encode at C's label 1000 (merge 2 took it); a write lands on C
	// during it (and on its twin, C's own stream).
	w := &a92Hook{f: func() {
		cc.Set(a93T + hookC.at)
		c.UpdateString(hookC.key, hookC.v)
	}}
	if _, err := c.WriteTo(w); err != nil {
		t.Fatalf("%s: WriteTo: %v", name, err)
	}
	ctw.Set(a93T + hookC.at)
	twin.UpdateString(hookC.key, hookC.v)
	cr := sketchtest.NewFakeClock()
	cr.Set(a93T + hookC.at + down)
	cfg.Clock = cr
	r := mustNewSketch(t, cfg)
	if err := r.UnmarshalBinary(w.Bytes()); err != nil {
		t.Fatalf("%s: restore: %v", name, err)
	}

	// U: every write at its clock's label, in order: Merge maps both
	// clocks' time.Time readings one to one (a cell of a replica ahead
	// stamped after the instant is read back; one behind decays the
	// gap), and so does U.
	all := append(append(append([]a95ChainWrite{}, wa...), wb...), wc...)
	all = append(all, hookA, hookB, hookC)
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	cu := sketchtest.NewFakeClock()
	cu.Set(a93T + start)
	u := mk(cu)
	uAtHi := false
	for _, x := range all {
		cu.Set(a93T + x.at)
		u.UpdateString(x.key, x.v)
		for _, k := range keys {
			for _, lv := range u.QueryDetailed([]byte(k)).Levels {
				if lv.Score >= hi {
					uAtHi = true
				}
			}
		}
	}
	last := max(all[len(all)-1].at, hookC.at+down)
	for _, x := range []int64{last, last + 1, last + 7, last + 500, last + 3000} {
		for _, ck := range []*sketchtest.FakeClock{ca.FakeClock, cb.FakeClock, ctw, cu, cr} {
			if ck.NowMillis() > a93T+x {
				t.Fatalf("%s: a clock is past the check's label %d", name, x)
			}
			ck.Set(a93T + x)
		}
		for _, k := range keys {
			got := r.QueryString(k)
			if got > hi {
				t.Errorf("%s: %s at %d: %v above Hi", name, k, x, got)
			}
			for _, in := range []struct {
				who string
				v   float64
			}{{"A", a.QueryString(k)}, {"B", b.QueryString(k)}, {"C", twin.QueryString(k)}} {
				if got < in.v*(1-1e-6) {
					t.Errorf("%s: %s at %d: restored chain %v below input %s %v", name, k, x, got, in.who, in.v)
				}
			}
			union := u.QueryString(k)
			if !uAtHi && got < union*(1-1e-5) {
				t.Errorf("%s: %s at %d: restored chain %v below the union %v (writes %v)", name, k, x, got, union, all)
			}
			if !lin && !uAtHi {
				if lim := union*math.Exp(lambda*3/1000)*(1+1e-5) + 1e-30; got > lim {
					t.Errorf("%s: %s at %d: restored chain %v above the union %v by more than 3 ms of the law", name, k, x, got, union)
				}
			}
		}
	}
	// TryUpdate decisions on R at the last label.
	for _, k := range keys {
		q := r.QueryString(k)
		if r.TryUpdateString(k, 1, (q+1)*(1-1e-9)) {
			t.Errorf("%s: %s: TryUpdate(1, %v) admitted at aggregate %v", name, k, (q+1)*(1-1e-9), q)
		}
		if !r.TryUpdateString(k, 1, q+1) {
			t.Errorf("%s: %s: TryUpdate(1, %v) denied at aggregate %v", name, k, q+1, q)
		}
		if after := r.QueryString(k); after < min(q+1, hi)*(1-1e-6) {
			t.Errorf("%s: %s: after an admitted TryUpdate(1) at %v reads %v", name, k, q, after)
		}
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatalf("%s: WriteTo of the restore: %v", name, err)
	}
}
