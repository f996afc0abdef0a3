package sketch_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Differential tests: the same operation sequence goes to the lock-free
// sketch and to the mutex reference (sketch/reference), built from one
// Config and driven by one FakeClock, so both map every key to the same
// cells and see the same times. The reference holds float64 scores; the
// lock-free sketch float32 scores rounded toward +Inf. The properties:
//
//	(a) no lost mass: every lock-free estimate (Query, UpdateAndQuery,
//	    each QueryDetailed level score) is >= the reference's, up to the
//	    float64 rounding slack of diffLinearSlack for Linear decay;
//	(b) bounded error: |lf - ref| <= 1e-6 * max(1, |ref|, peak) * (ops+1),
//	    the float32 rounding (2^-23 relative per write, with room to spare)
//	    accumulated over the writes so far. peak is the largest magnitude
//	    the key's reference cells ever held: float32 rounding error is
//	    absolute, and Linear decay lowers a score without shrinking the
//	    error it carries, so the error scales with the largest value the
//	    cell held, not with the present one;
//	(c) exactness: with decay None and integer deltas whose sums stay
//	    below 2^24, every value is a float32 integer, so both agree
//	    exactly, cell for cell, and every TryUpdate decision agrees.

// diffLinearSlack is how far (a) lets a Linear-decay lock-free value fall
// below the reference's. Both use the same expression, max(s - rate*dt/1000,
// 0), but the reference decays on every access (Query writes the decayed
// score back) while the lock-free sketch decays lazily from its last write
// in one step: s - d1 - d2 - d3 and s - (d1+d2+d3) differ by float64
// rounding (a few ulps of the score), which the float32 upward rounding
// usually hides, but not when the lock-free score happens to be a float32
// value already (an integer sum, a drained 0). None needs no slack: a
// float64 sum and a float32 sum rounded up are both monotone in their
// inputs, so lf >= ref holds by induction, exactly. Exponential needs none
// either: the lock-free decay is biased upward by 2^-40, far more than the
// reference's composition rounding (except below 1e-290, see
// diffExpTinySlack).
func diffLinearSlack(ref float64) float64 { return 1e-12 * max(1, math.Abs(ref)) }

// diffExpTinySlack is (a)'s slack for Exponential decay: none, except for
// values below 1e-290, where the lock-free decay's 2^-40 upward bias is
// below the float64 subnormal resolution and the two compositions may
// round an ulp apart (seen: 4.4567237641787e-311 against
// 4.456723764179e-311, 18 decayed over an hour at 0.2/s).
func diffExpTinySlack(ref float64) float64 {
	if math.Abs(ref) < 1e-290 {
		return 1e-300
	}
	return 0
}

// diffFataler is what the harness needs from *testing.T and *rapid.T.
type diffFataler interface {
	Fatalf(format string, args ...any)
}

// diffHarness applies operations to a lock-free sketch and a reference
// built from the same Config and checks (a), (b) and (c) after each.
type diffHarness struct {
	t      diffFataler
	lf     *sketch.Sketch
	ref    *ref.Sketch
	clock  *sketchtest.FakeClock
	keys   [][]byte
	cells  [][]uint32 // cells[k][l] is key k's cell index at level l (sketch.Index)
	levels uint32
	m      uint32
	exact  bool                      // (c): every result must agree exactly
	slack  func(ref float64) float64 // (a): how far lf may be below ref
	ops    int                       // operations applied so far
	peak   []float64                 // peak[l*m+i]: the largest |score| reference cell (l, i) has held
	trace  []string                  // the operations so far, for failure messages
}

func newDiffHarness(t diffFataler, cfg sketch.Config, clock *sketchtest.FakeClock, keys [][]byte, exact bool) *diffHarness {
	lf, err := sketch.New(cfg)
	if err != nil {
		t.Fatalf("sketch.New(%+v): %v", cfg, err)
	}
	ref, err := ref.New(cfg)
	if err != nil {
		t.Fatalf("ref.New(%+v): %v", cfg, err)
	}
	norm := lf.Config()
	h := &diffHarness{
		t: t, lf: lf, ref: ref, clock: clock, keys: keys,
		levels: norm.Levels, m: norm.CellsPerLevel, exact: exact,
		slack: func(float64) float64 { return 0 },
		peak:  make([]float64, norm.Levels*norm.CellsPerLevel),
	}
	switch k, _ := law.Params(norm.Decay); k {
	case law.KindLinear:
		h.slack = diffLinearSlack
	case law.KindExponential:
		h.slack = diffExpTinySlack
	}
	hasher := norm.Hasher(norm.Seed)
	for _, key := range keys {
		hash := hasher.Sum64(key)
		idx := make([]uint32, norm.Levels)
		for l := range idx {
			idx[l] = core.Index(hash, uint32(l), norm.CellsPerLevel)
		}
		h.cells = append(h.cells, idx)
	}
	return h
}

func (h *diffHarness) fatalf(format string, args ...any) {
	tail := h.trace
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	h.t.Fatalf("after %d ops (last: %s): %s", h.ops, strings.Join(tail, "; "), fmt.Sprintf(format, args...))
}

func (h *diffHarness) record(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf(format, args...))
}

// done counts an operation and refreshes the peaks from the reference.
func (h *diffHarness) done() {
	h.ops++
	for l := range h.levels {
		for i := range h.m {
			if v := math.Abs(h.ref.CellScore(l, i)); v > h.peak[l*h.m+i] {
				h.peak[l*h.m+i] = v
			}
		}
	}
}

// keyPeak is the largest peak among key k's cells at the given levels
// (all levels when level < 0).
func (h *diffHarness) keyPeak(k int, level int) float64 {
	p := 0.0
	for l, i := range h.cells[k] {
		if level < 0 || l == level {
			p = max(p, h.peak[uint32(l)*h.m+i])
		}
	}
	return p
}

// check compares one lock-free value with the reference's for key k
// (level < 0: an aggregate).
func (h *diffHarness) check(what string, k, level int, lf, ref float64) {
	if math.IsNaN(lf) || math.IsInf(lf, 0) {
		h.fatalf("%s(key %d): lock-free returned %v", what, k, lf)
	}
	if h.exact {
		if lf != ref {
			h.fatalf("(c) %s(key %d) level %d: lock-free %v != reference %v", what, k, level, lf, ref)
		}
		return
	}
	if lf < ref-h.slack(ref) {
		h.fatalf("(a) %s(key %d) level %d: lock-free %v < reference %v (by %g)", what, k, level, lf, ref, ref-lf)
	}
	if tol := 1e-6 * max(1, math.Abs(ref), h.keyPeak(k, level)) * float64(h.ops+1); math.Abs(lf-ref) > tol {
		h.fatalf("(b) %s(key %d) level %d: |lock-free %v - reference %v| = %g > %g", what, k, level, lf, ref, math.Abs(lf-ref), tol)
	}
}

func (h *diffHarness) checkDetail(k int, lf, ref sketch.Detail) {
	if len(lf.Levels) != int(h.levels) || len(ref.Levels) != int(h.levels) {
		h.fatalf("QueryDetailed(key %d): %d and %d levels, want %d", k, len(lf.Levels), len(ref.Levels), h.levels)
	}
	for l := range lf.Levels {
		a, b := lf.Levels[l], ref.Levels[l]
		if a.Level != uint32(l) || b.Level != uint32(l) || a.Index != h.cells[k][l] || b.Index != h.cells[k][l] {
			h.fatalf("QueryDetailed(key %d) level %d: lock-free (%d, %d), reference (%d, %d), want (%d, %d)",
				k, l, a.Level, a.Index, b.Level, b.Index, l, h.cells[k][l])
		}
		h.check("QueryDetailed", k, l, a.Score, b.Score)
	}
	h.check("QueryDetailed.Score", k, -1, lf.Score, ref.Score)
}

func (h *diffHarness) update(k int, delta float64, str bool) {
	h.record("Update(%d, %v)", k, delta)
	if str {
		h.lf.UpdateString(string(h.keys[k]), delta)
		h.ref.UpdateString(string(h.keys[k]), delta)
	} else {
		h.lf.Update(h.keys[k], delta)
		h.ref.Update(h.keys[k], delta)
	}
	h.done()
}

func (h *diffHarness) query(k int, str bool) {
	h.record("Query(%d)", k)
	var lf, ref float64
	if str {
		lf, ref = h.lf.QueryString(string(h.keys[k])), h.ref.QueryString(string(h.keys[k]))
	} else {
		lf, ref = h.lf.Query(h.keys[k]), h.ref.Query(h.keys[k])
	}
	if d := h.lf.QueryDetailed(h.keys[k]); d.Score != lf {
		h.fatalf("key %d: Query %v != QueryDetailed().Score %v at the same time", k, lf, d.Score)
	}
	h.done()
	h.check("Query", k, -1, lf, ref)
}

func (h *diffHarness) updateAndQuery(k int, delta float64, str bool) {
	h.record("UpdateAndQuery(%d, %v)", k, delta)
	var lf, ref float64
	if str {
		lf, ref = h.lf.UpdateAndQueryString(string(h.keys[k]), delta), h.ref.UpdateAndQueryString(string(h.keys[k]), delta)
	} else {
		lf, ref = h.lf.UpdateAndQuery(h.keys[k], delta), h.ref.UpdateAndQuery(h.keys[k], delta)
	}
	if q := h.lf.Query(h.keys[k]); q != lf {
		h.fatalf("key %d: UpdateAndQuery returned %v, Query right after %v", k, lf, q)
	}
	h.done()
	h.check("UpdateAndQuery", k, -1, lf, ref)
}

func (h *diffHarness) queryDetailed(k int) {
	h.record("QueryDetailed(%d)", k)
	lf, ref := h.lf.QueryDetailed(h.keys[k]), h.ref.QueryDetailed(h.keys[k])
	h.done()
	h.checkDetail(k, lf, ref)
}

// tryUpdate runs TryUpdate with limit = (reference aggregate) + delta +
// offset, so offset 0 is the exact boundary (admitted: the test is <=).
// Both sides are first queried at the same time, and each decision must
// match its own view. Outside exact mode the two may decide differently
// when the limit falls between their estimates (within (a)/(b) of each
// other); the side that denied is then given the admitted write as an
// Update, which is the same per-cell operation, so the histories stay
// the same.
func (h *diffHarness) tryUpdate(k int, delta, offset float64, str bool) {
	lfPre, refPre := h.lf.QueryDetailed(h.keys[k]), h.ref.QueryDetailed(h.keys[k])
	h.checkDetail(k, lfPre, refPre)
	limit := refPre.Score + delta + offset // above Hi too: the decision is still aggregate + delta <= limit
	h.record("TryUpdate(%d, %v, %v)", k, delta, limit)
	var lfOK, refOK bool
	if str {
		lfOK = h.lf.TryUpdateString(string(h.keys[k]), delta, limit)
		refOK = h.ref.TryUpdateString(string(h.keys[k]), delta, limit)
	} else {
		lfOK = h.lf.TryUpdate(h.keys[k], delta, limit)
		refOK = h.ref.TryUpdate(h.keys[k], delta, limit)
	}
	if want := lfPre.Score+delta <= limit; lfOK != want {
		h.fatalf("TryUpdate(key %d, %v, %v) = %v, but its own estimate was %v", k, delta, limit, lfOK, lfPre.Score)
	}
	if want := refPre.Score+delta <= limit; refOK != want {
		h.fatalf("reference TryUpdate(key %d, %v, %v) = %v, but its own estimate was %v", k, delta, limit, refOK, refPre.Score)
	}
	switch {
	case lfOK == refOK:
	case h.exact:
		h.fatalf("(c) TryUpdate(key %d, %v, %v): lock-free %v, reference %v", k, delta, limit, lfOK, refOK)
	case refOK:
		h.record("resync: lock-free Update(%d, %v)", k, delta)
		h.lf.Update(h.keys[k], delta)
	default:
		h.record("resync: reference Update(%d, %v)", k, delta)
		h.ref.Update(h.keys[k], delta)
	}
	h.done()
}

func (h *diffHarness) advance(ms int64) {
	h.record("Advance(%dms)", ms)
	h.clock.Advance(time.Duration(ms) * time.Millisecond)
}

// checkAll compares every key's cells.
func (h *diffHarness) checkAll() {
	for k := range h.keys {
		h.queryDetailed(k)
	}
}

// diffCase is one family of differential runs.
type diffCase struct {
	name      string
	kind      law.Kind
	exact     bool // integer deltas, None decay: (c)
	mixedSign bool // deltas of both signs, Lo=-1000, Hi=1000 (implies exact)
	backwards bool // the clock also steps backwards
}

// runDifferential draws a configuration and an operation sequence and
// applies it through a diffHarness.
func runDifferential(t *rapid.T, dc diffCase, agg sketch.Aggregator) {
	clock := sketchtest.NewFakeClock()
	clock.Set(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "start")) // negative clocks too: the reference decays there as well
	cfg := sketch.Config{
		Levels:        rapid.Uint32Range(1, 4).Draw(t, "L"),
		CellsPerLevel: rapid.Uint32Range(1, 64).Draw(t, "M"),
		Seed:          rapid.Uint64().Draw(t, "seed"),
		Aggregator:    agg,
		Clock:         clock,
	}
	if rapid.Bool().Draw(t, "siphash") {
		cfg.Hasher = sketch.SipHash()
	}
	switch dc.kind {
	case law.KindLinear:
		cfg.Decay = decay.Linear(rapid.Float64Range(0.05, 200).Draw(t, "rate"))
	case law.KindExponential:
		cfg.Decay = decay.Exponential(rapid.Float64Range(0.001, 10).Draw(t, "lambda"))
	default:
		cfg.Decay = decay.None()
	}
	switch {
	case dc.mixedSign:
		cfg.Lo, cfg.Hi = -1000, 1000
	case dc.exact:
		// Float32 integers: 2^24 is never reached (deltas <= 1000, ops <= 120).
		cfg.Lo, cfg.Hi = rapid.SampledFrom([]float64{0, -8}).Draw(t, "Lo"), rapid.SampledFrom([]float64{1 << 24, 5000}).Draw(t, "Hi")
	default:
		// 777.7 is not a float32: the lock-free sketch clamps to it rounded up.
		cfg.Lo, cfg.Hi = rapid.SampledFrom([]float64{0, -8}).Draw(t, "Lo"), rapid.SampledFrom([]float64{1e9, 5000, 777.7}).Draw(t, "Hi")
	}
	nKeys := rapid.IntRange(1, 8).Draw(t, "keys")
	keys := make([][]byte, nKeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	h := newDiffHarness(t, cfg, clock, keys, dc.exact || dc.mixedSign)

	var deltaGen *rapid.Generator[float64]
	switch {
	case dc.mixedSign:
		deltaGen = rapid.Map(rapid.IntRange(-300, 300), func(i int) float64 { return float64(i) })
	case dc.exact:
		deltaGen = rapid.Map(rapid.IntRange(0, 1000), func(i int) float64 { return float64(i) })
	default:
		deltaGen = rapid.OneOf(
			rapid.Map(rapid.IntRange(0, 100), func(i int) float64 { return float64(i) }),
			rapid.Float64Range(0, 100),
			rapid.Float64Range(0, 1e-3),
			rapid.Just(0.0),
		)
	}
	var offsetGen *rapid.Generator[float64]
	if h.exact {
		offsetGen = rapid.OneOf(rapid.Just(0.0), rapid.Map(rapid.IntRange(-20, 20), func(i int) float64 { return float64(i) }))
	} else {
		offsetGen = rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(-1e-9, 1e-9), rapid.Float64Range(-20, 20))
	}
	advanceGen := rapid.OneOf(
		rapid.Int64Range(0, 20),
		rapid.Int64Range(0, 3000),
		rapid.SampledFrom([]int64{60_000, 3_600_000, 5 * 3_600_000}), // 5 h: past the exponential tables
	)
	keyGen := rapid.IntRange(0, nKeys-1)

	n := rapid.IntRange(1, 120).Draw(t, "ops")
	for range n {
		switch op := rapid.IntRange(0, 99).Draw(t, "op"); {
		case op < 25:
			h.update(keyGen.Draw(t, "key"), deltaGen.Draw(t, "delta"), rapid.Bool().Draw(t, "str"))
		case op < 40:
			h.query(keyGen.Draw(t, "key"), rapid.Bool().Draw(t, "str"))
		case op < 55:
			h.updateAndQuery(keyGen.Draw(t, "key"), deltaGen.Draw(t, "delta"), rapid.Bool().Draw(t, "str"))
		case op < 75:
			h.tryUpdate(keyGen.Draw(t, "key"), deltaGen.Draw(t, "delta"), offsetGen.Draw(t, "offset"), rapid.Bool().Draw(t, "str"))
		case op < 85:
			h.queryDetailed(keyGen.Draw(t, "key"))
		case op < 97 || !dc.backwards:
			h.advance(advanceGen.Draw(t, "advance"))
		default:
			h.advance(-rapid.Int64Range(1, 5000).Draw(t, "back"))
		}
	}
	h.checkAll()
}

// TestDifferential checks (a) and (b) for every decay law and aggregator
// with non-negative deltas, and (c) for decay None with integer deltas.
// The clock only moves forward for the draining laws: see
// TestDifferentialBackwardsClock.
func TestDifferential(t *testing.T) {
	testsize.Serial(t)
	cases := []diffCase{
		{name: "None", kind: law.KindNone, backwards: true},
		{name: "None-exact", kind: law.KindNone, exact: true, backwards: true},
		{name: "Linear", kind: law.KindLinear},
		{name: "Exponential", kind: law.KindExponential},
	}
	for _, dc := range cases {
		for _, agg := range allAggregators {
			t.Run(fmt.Sprintf("decay=%s/agg=%v", dc.name, agg), rapid.MakeCheck(func(t *rapid.T) {
				runDifferential(t, dc, agg)
			}))
		}
	}
}

// TestDifferentialMixedSign: decay None, integer deltas of both signs,
// clamps Lo=-1000, Hi=1000: both implementations agree exactly.
func TestDifferentialMixedSign(t *testing.T) {
	for _, agg := range allAggregators {
		t.Run(fmt.Sprintf("agg=%v", agg), rapid.MakeCheck(func(t *rapid.T) {
			runDifferential(t, diffCase{kind: law.KindNone, mixedSign: true, backwards: true}, agg)
		}))
	}
}

// TestDifferentialBackwardsClock is TestDifferential for the draining laws
// with backwards clock steps mixed in. Regression test: the reference's
// Query writes the decayed score and its time back (as grudge does), the
// lock-free Query only reads, so before both kept a high-water mark of
// time (sketch.Timebase) a backwards step made them count elapsed time
// from different instants. Two of the counterexamples it found
// (Linear(1), Hi=1e9, one key, clock starting at 0):
//
//	Update(k, 100); Advance(10s); Query(k) -> 90 (both);
//	Advance(-5s); Query(k) -> lock-free 95, reference 90.
//
//	Advance(200s); Query(k) -> 0; Advance(-5s); Update(k, 10);
//	Advance(10s); Query(k) -> lock-free 0, reference 5.
func TestDifferentialBackwardsClock(t *testing.T) {
	for _, kind := range []law.Kind{law.KindLinear, law.KindExponential} {
		t.Run("decay="+kind.String(), rapid.MakeCheck(func(t *rapid.T) {
			runDifferential(t, diffCase{kind: kind, backwards: true}, sketch.Min)
		}))
	}
}

// TestExponentialTinyBelowReference: for decayed values below 1e-290,
// where no relative bias survives, the lock-free read is biased by a few
// subnormal ulps and stays >= the reference's step-by-step decay (it once
// landed one ulp below: 2.393945412835098e-299 < 2.3939454128350985e-299).
func TestExponentialTinyBelowReference(t *testing.T) {
	for _, lambda := range []float64{0.0191, 0.0193} {
		fc := sketchtest.NewFakeClock()
		cfg := sketch.Config{Levels: 1, CellsPerLevel: 1, Hi: 1e9, Decay: decay.Exponential(lambda), Clock: fc}
		lf, ref := mustNewSketch(t, cfg), mustNewReference(t, cfg)
		k := []byte("k")
		lf.Update(k, 1)
		ref.Update(k, 1)
		fc.Advance(5 * time.Hour)
		ref.Query(k) // the reference decays step by step; the lock-free sketch will in one go
		fc.Advance(5 * time.Hour)
		if a, b := lf.Query(k), ref.Query(k); a < b {
			t.Errorf("Exponential(%v): lock-free Query %v < reference %v", lambda, a, b)
		}
	}
}
