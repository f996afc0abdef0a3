package sketch_test

// Mutation audit of the conformance suite sketchtest.TestScorer.
//
// API.md (sketch/sketchtest): "TestScorer(t, newFunc) (and one for
// rotators): the whole contract as a conformance suite, in the style of
// testing/fstest.TestFS." Package sketch's doc lists its guarantees as
// "what sketchtest.TestScorer checks".
//
// Each mutant (audit3_mut_scorers_test.go) wraps a correct sketch and
// breaks one promise. For each:
//   - TestAudit3MutWitnesses shows, directly and deterministically, that
//     the mutant breaks the promise and that the real sketch (or rotator)
//     keeps it (so the mutant is a real violation, not a misreading);
//   - TestAudit3MutSuiteCatches runs TestScorer on the mutant in a child
//     process (TestScorer takes a *testing.T, so a failure cannot be
//     observed in-process without failing the caller) and requires the
//     suite to FAIL. A subtest that fails here is a promise the suite
//     does not check.
// TestAudit3MutSuitePassesCorrect requires the suite to pass, under the
// same harness, on the sketch, the reference, both rotators and the
// identity wrapper (a control of the harness).

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a3mChildEnv = "AUDIT3_MUT_CHILD"

type a3mMutant struct {
	name    string
	promise string // the promise it breaks, quoted
	build   sketchtest.Factory
	witness func(t testing.TB, f sketchtest.Factory) string // "" when the promise holds
	real    sketchtest.Factory                              // the correct counterpart for the witness; nil: sketch.New
}

func a3mRealSketch(t testing.TB, cfg sketch.Config) sketch.Scorer { return a3mNew(t, cfg) }

const (
	pNeverUnder  = `API.md: "Min aggregation never under-estimates: Query(k) >= the key's true score (decay rounding is upward)"`
	pLinear      = `API.md decay: "func Linear(rate float64) Decay // moves toward 0 by rate per second, stops at 0"`
	pAtomic      = `API.md: "TryUpdate(k, d, limit) applies d to all L cells only if aggregate + d <= limit, atomically with respect to every other TryUpdate, of this key or of any key that shares cells with it"`
	pOnlyIf      = `API.md: "TryUpdate(k, d, limit) applies d to all L cells only if aggregate + d <= limit"`
	pDeniedReads = `sketch doc: "Query and a denied TryUpdate only read." / API.md: "applies d to all L cells only if aggregate + d <= limit"`
	pAboveHi     = `API.md: "Any finite limit is accepted, as in grudge: the decision is aggregate + delta <= limit even when limit > Hi"`
	pNonFinite   = `API.md: "NaN or +/-Inf delta or limit panics with a message that starts sketch:; no cell is ever left holding NaN or Inf" / sketch doc: "before any cell is touched"`
	pHiInf       = `sketch doc: "with Hi = +Inf a score saturates at MaxFloat32 (3.4e38), as if Hi were MaxFloat32" / API.md: "no cell is ever left holding NaN or Inf"`
	pBackStep    = `API.md: "A backwards clock step counts as zero elapsed time, never as growth."`
	pIdle        = `API.md: "Any idle time, 1 ms to years, decays as the reference (int64 ms) does."`
	pNoAlloc     = `API.md: "no allocation on Update, Query, UpdateAndQuery, TryUpdate and the string twins."`
	pTwins       = `API.md: "string twins with zero allocations: UpdateString, QueryString, UpdateAndQueryString, TryUpdateString" (the same operations on a string key) / sketch doc: "a String twin ... that takes a string"`
	pDetail      = `API.md: "QueryDetailed(key []byte) Detail // per-level scores and cell indexes"; sketch.LevelDetail: "Index uint32 // cell index in the level's row", "Score float64 // the cell's score, decayed to the time of the call"`
	pClamp       = `sketchtest/sketch doc: "scores stay within [Lo, Hi]"; "A Hi that no float32 holds (0.1) is stored rounded up and read back capped at Hi: no read exceeds Hi."`
	pAtTime      = `API.md: "A time.Time is converted to the sketch's own scale ..., so time.Now(), a fake clock's Now() and a stored wall time mean what they say."`
	pAtFuture    = `sketch doc: "an At time ahead of the clock counts as the clock's reading"; sketchtest: "a future time counts as the clock's reading and never stops decay"`
	pNoGoroutine = `API.md: "Decay is applied lazily on access; nothing runs in the background; no goroutine is ever started." (the suite: no goroutine outlives the Scorer)`
	pRotator     = `API.md: "TestScorer(t, newFunc) (and one for rotators)"; rotator: "rotation happens lazily on access"; rotator doc: "Forgetting: a write is gone from every generation at most N x Period after it was made."`
)

func a3mMutants() []a3mMutant {
	return []a3mMutant{
		{name: "QueryLow1pct", promise: pNeverUnder, build: a3mQueryLow1pct, witness: a3mWitUnder},
		{name: "DecayRoundsDown", promise: pNeverUnder, build: a3mDecayRoundsDown, witness: a3mWitUnder},
		{name: "DecayExtraMs", promise: pNeverUnder, build: a3mDecayExtraMs, witness: a3mWitUnder},
		{name: "LinearNoDecay", promise: pLinear, build: a3mLinearNoDecay, witness: a3mWitLinear},

		{name: "TryNotAtomic", promise: pAtomic, build: a3mTryNotAtomicF, witness: a3mWitSentinel(false)},
		{name: "TryStringNotAtomic", promise: pAtomic, build: a3mTryStringNotAtomicF, witness: a3mWitSentinel(true)},
		{name: "TryAtomicPerKeyOnly", promise: pAtomic, build: a3mTryPerKeyF, witness: a3mWitColliding},
		{name: "TryStrictLess", promise: pOnlyIf, build: a3mTryStrictLess, witness: a3mWitTryEq},
		{name: "TryFloat32Decision", promise: pOnlyIf, build: a3mTryFloat32Decision, witness: a3mWitTryTiny},
		{name: "TryNegDeltaAlwaysAdmitted", promise: pOnlyIf, build: a3mTryNegAdmittedF, witness: a3mWitTryNeg},
		{name: "TryDeniedFillsToLimit", promise: pDeniedReads, build: a3mTryDeniedFillsF, witness: a3mWitTryDenied},
		{name: "TryLimitCappedAtHi", promise: pAboveHi, build: a3mTryLimitCappedAtHi, witness: a3mWitAboveHi},
		{name: "TryIgnoresLimitAboveHi", promise: pAboveHi, build: a3mTryIgnoresLimitAboveHi, witness: a3mWitAboveHi},

		{name: "NaNIgnored", promise: pNonFinite, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mNaNIgnored{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitNonFinite},
		{name: "PanicNoPrefix", promise: pNonFinite, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mPanicNoPrefix{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitNonFinite},
		{name: "WritesThenPanics", promise: pNonFinite, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mWritesThenPanics{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitNonFinite},
		{name: "InfLimitNoPanic", promise: pNonFinite, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mInfLimitOK{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitNonFinite},
		{name: "HiInfReadsInf", promise: pHiInf, build: a3mHiInfReadsInf, witness: a3mWitHiInf},

		{name: "BackStepAsElapsed", promise: pBackStep, build: a3mBackStepAsElapsed, witness: a3mWitBackStep},
		{name: "BackStepGrows", promise: pBackStep, build: a3mBackGrowsF, witness: a3mWitBackStep},
		{name: "AgeWraps32", promise: pIdle, build: a3mAgeWraps32, witness: a3mWitIdle},
		{name: "IdleCap49Days", promise: pIdle, build: a3mIdleCap49d, witness: a3mWitIdle},

		{name: "UpdateAllocs", promise: pNoAlloc, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mUpdateAllocs{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitAllocs},
		{name: "TwinsAllocLongKeys", promise: pNoAlloc, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mTwinLongAllocs{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitAllocs},
		{name: "QueryStringLow", promise: pTwins, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mQueryStringLow{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitTwins},
		{name: "UpdateStringNoop", promise: pTwins, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mUpdateStringNoop{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitTwins},
		{name: "UpdateAndQueryStringStale", promise: pTwins, build: func(t testing.TB, c sketch.Config) sketch.Scorer { return a3mUAQStringStale{a3mFwd{a3mNew(t, c)}} }, witness: a3mWitTwins},

		{name: "DetailLevelsPlusOne", promise: pDetail, build: a3mDetailLevelsPlusOne, witness: a3mWitDetail},
		{name: "DetailIndexZero", promise: pDetail, build: a3mDetailIndexZero, witness: a3mWitDetail},
		{name: "DetailLevelsUndecayed", promise: pDetail, build: a3mDetailUndecayedF, witness: a3mWitDetail},

		{name: "HiNotClamped", promise: pClamp, build: a3mHiNotClamped, witness: a3mWitClamp},
		{name: "HiInexactReadAbove", promise: pClamp, build: a3mHiInexactAbove, witness: a3mWitClamp},
		{name: "ClampOnReadOnly", promise: pClamp, build: a3mClampOnReadOnly, witness: a3mWitClamp},

		{name: "AtIgnoresTime", promise: pAtTime, build: a3mAtIgnoresTimeF, witness: a3mWitAtTime},
		{name: "AtFutureHonoured", promise: pAtFuture, build: a3mAtFutureF, witness: a3mWitAtFuture},

		{name: "StartsGoroutine", promise: pNoGoroutine, build: a3mStartsGoroutine, witness: a3mWitGoroutines},

		{name: "RotatorIgnoresPeriod", promise: pRotator, build: a3mNoRotateF, witness: a3mWitForgets, real: a3mRealRotator1h},
	}
}

// a3mCorrect are the correct implementations TestScorer must pass: the
// sketch, the reference, both rotators, and the identity wrapper (a
// control of the harness).
var a3mCorrect = map[string]sketchtest.Factory{
	"Identity": a3mIdentity,
	"Sketch":   a3mRealSketch,
	"Reference": func(t testing.TB, cfg sketch.Config) sketch.Scorer {
		s, err := reference.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	},
	"ReferenceRotator": func(t testing.TB, cfg sketch.Config) sketch.Scorer {
		r, err := reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Period: 1000 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	},
	"Rotator": func(t testing.TB, cfg sketch.Config) sketch.Scorer {
		r, err := rotator.New(rotator.Config{Sketch: cfg, Period: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	},
}

// TestAudit3MutChild is the child-process entry: with AUDIT3_MUT_CHILD
// naming a mutant or a correct implementation it runs TestScorer on it;
// otherwise it does nothing.
func TestAudit3MutChild(t *testing.T) {
	name := os.Getenv(a3mChildEnv)
	if name == "" {
		return
	}
	// The rotators run the rotators' suite (TestRotator: TestScorer's
	// checks, with a long idle time forgetting, plus the window).
	switch name {
	case "Rotator":
		sketchtest.TestRotator(t, func(t testing.TB, cfg sketch.Config, n uint32, p time.Duration) sketch.Scorer {
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: n, Period: p})
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
		return
	case "RotatorIgnoresPeriod":
		sketchtest.TestRotator(t, func(t testing.TB, cfg sketch.Config, _ uint32, _ time.Duration) sketch.Scorer {
			return a3mNoRotateF(t, cfg)
		})
		return
	}
	if f, ok := a3mCorrect[name]; ok {
		sketchtest.TestScorer(t, f)
		return
	}
	for _, m := range a3mMutants() {
		if m.name == name {
			sketchtest.TestScorer(t, m.build)
			return
		}
	}
	t.Fatalf("no mutant %q", name)
}

// a3mRunChild runs TestScorer on the named mutant in a child process and
// returns whether the suite passed and which top-level checks failed.
// -test.short: the suite's concurrent checks run 3 repetitions instead of
// 20 (its documented short mode), to keep the audit fast; every
// concurrency mutant is still caught.
func a3mRunChild(t *testing.T, name string) (passed bool, failed []string) {
	t.Helper()
	passed, failed, err := testchild.Suite("TestAudit3MutChild", a3mChildEnv, name, true)
	if err != nil {
		t.Fatal(err)
	}
	return passed, failed
}

// TestAudit3MutWitnesses: every mutant really breaks its promise, and the
// correct implementation keeps it, on the same deterministic scenario.
// (Sequential: the allocation and goroutine witnesses count process-wide.)
func TestAudit3MutWitnesses(t *testing.T) {
	for _, m := range a3mMutants() {
		t.Run(m.name, func(t *testing.T) {
			real := m.real
			if real == nil {
				real = a3mRealSketch
			}
			if v := m.witness(t, real); v != "" {
				t.Fatalf("witness broken: the correct implementation fails it: %s", v)
			}
			if v := m.witness(t, m.build); v == "" {
				t.Fatalf("mutant %s does not break its promise on the witness", m.name)
			} else {
				t.Logf("mutant violation: %s", v)
			}
		})
	}
}

// TestAudit3MutSuiteCatches: TestScorer fails on every mutant. Each
// failing subtest is a promise the conformance suite lets through.
func TestAudit3MutSuiteCatches(t *testing.T) {
	if os.Getenv(a3mChildEnv) != "" {
		return
	}
	for _, m := range a3mMutants() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			passed, failed := a3mRunChild(t, m.name)
			if passed {
				t.Errorf("sketchtest.TestScorer PASSES mutant %s; the promise it breaks is unchecked:\n    %s", m.name, m.promise)
				return
			}
			t.Logf("caught by %v", failed)
		})
	}
}

// TestAudit3MutSuitePassesCorrect: TestScorer passes the sketch, the
// reference, both rotators and the identity wrapper (each in a child,
// under the same flags as the mutants).
func TestAudit3MutSuitePassesCorrect(t *testing.T) {
	if os.Getenv(a3mChildEnv) != "" {
		return
	}
	for name := range a3mCorrect {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if passed, failed := a3mRunChild(t, name); !passed {
				t.Fatalf("TestScorer fails the correct %s: %v", name, failed)
			}
		})
	}
}

// ---- witnesses ----

func a3mFake(ms int64) *sketchtest.FakeClock {
	c := sketchtest.NewFakeClock()
	c.Set(ms)
	return c
}

// a3mWitUnder: one key, Exponential(0.5): Query >= the law's value.
func a3mWitUnder(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_000_000)
	law := decay.Exponential(0.5)
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: clk})
	k := []byte("k")
	s.Update(k, 100)
	el := int64(0)
	for _, step := range []int64{1, 1, 7, 700, 3000} {
		clk.Advance(time.Duration(step) * time.Millisecond)
		el += step
		if got, want := s.Query(k), law.Apply(100, el); got < want {
			return fmt.Sprintf("after %d ms: Query = %.17g < true score %.17g", el, got, want)
		}
	}
	return ""
}

// a3mWitLinear: Linear(3): 100 reads 97 one second on.
func a3mWitLinear(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_000_000)
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(3), Clock: clk})
	s.Update([]byte("k"), 100)
	clk.Advance(time.Second)
	if got := s.Query([]byte("k")); math.Abs(got-97) > 1e-3 {
		return fmt.Sprintf("Linear(3): 100 reads %v one second on, want 97", got)
	}
	return ""
}

// a3mRace: n goroutines call try until it denies; returns admissions.
func a3mRace(n int, try func() bool) int64 {
	var admitted atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			for try() {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted.Load()
}

// a3mWitSentinel: 50 goroutines racing TryUpdate(k, 1, 1000) admit
// exactly 1000 (up to 10 runs at GOMAXPROCS 8; the first wrong count is
// the violation).
func a3mWitSentinel(str bool) func(t testing.TB, f sketchtest.Factory) string {
	return func(t testing.TB, f sketchtest.Factory) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
		for rep := range 10 {
			s := f(t, sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e9})
			try := func() bool { return s.TryUpdate([]byte("sentinel"), 1, 1000) }
			if str {
				try = func() bool { return s.TryUpdateString("sentinel", 1, 1000) }
			}
			if got := a3mRace(50, try); got != 1000 {
				return fmt.Sprintf("run %d: %d admitted, want exactly 1000", rep, got)
			}
		}
		return ""
	}
}

// a3mWitColliding: CellsPerLevel 1, 32 goroutines on distinct keys: the
// total admitted never exceeds the limit.
func a3mWitColliding(t testing.TB, f sketchtest.Factory) string {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for rep := range 10 {
		s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 1e9})
		var next atomic.Int64
		got := a3mRace(32, func() bool { return s.TryUpdate([]byte(fmt.Sprint("key-", next.Add(1))), 1, 300) })
		if got > 300 {
			return fmt.Sprintf("run %d: %d admitted over colliding keys, limit 300", rep, got)
		}
	}
	return ""
}

// a3mWitTryEq: at 9, TryUpdate(1, 10) is admitted (9 + 1 <= 10).
func a3mWitTryEq(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9})
	s.Update([]byte("k"), 9)
	if !s.TryUpdate([]byte("k"), 1, 10) {
		return "at 9, TryUpdate(1, limit 10) denied: 9 + 1 <= 10"
	}
	return ""
}

// a3mWitTryTiny: at 2^24, TryUpdate(1, 2^24) is denied (a whole unit over);
// at 1000, TryUpdate(1e-5, 1000) is denied (1000.00001 > 1000).
func a3mWitTryTiny(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9})
	s.Update([]byte("big"), 1<<24)
	if s.TryUpdate([]byte("big"), 1, 1<<24) {
		return fmt.Sprintf("at 2^24, TryUpdate(1, limit 2^24) admitted: 2^24 + 1 > 2^24 (now %v)", s.Query([]byte("big")))
	}
	s.Update([]byte("k"), 1000)
	if s.TryUpdate([]byte("k"), 1e-5, 1000) {
		return fmt.Sprintf("at 1000, TryUpdate(1e-5, limit 1000) admitted: 1000 + 1e-5 > 1000 (now %v)", s.Query([]byte("k")))
	}
	return ""
}

// a3mWitTryNeg: at 50, TryUpdate(-10, 30) is denied (40 > 30) and writes nothing.
func a3mWitTryNeg(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9})
	s.Update([]byte("k"), 50)
	if s.TryUpdate([]byte("k"), -10, 30) {
		return fmt.Sprintf("at 50, TryUpdate(-10, limit 30) admitted: 50 - 10 > 30 (now %v)", s.Query([]byte("k")))
	}
	return ""
}

// a3mWitTryDenied: at 8, TryUpdate(5, 10) is denied and leaves 8.
func a3mWitTryDenied(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9})
	s.Update([]byte("k"), 8)
	if s.TryUpdate([]byte("k"), 5, 10) {
		return "at 8, TryUpdate(5, limit 10) admitted"
	}
	if got := s.Query([]byte("k")); got != 8 {
		return fmt.Sprintf("a denied TryUpdate(5, limit 10) at 8 wrote: Query = %v, want 8", got)
	}
	return ""
}

// a3mWitAboveHi: Hi 10, at 10, TryUpdate(5, 15) is admitted (10 + 5 <= 15).
func a3mWitAboveHi(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 10})
	s.Update([]byte("k"), 10)
	if !s.TryUpdate([]byte("k"), 5, 15) {
		return "Hi 10, at 10: TryUpdate(5, limit 15) denied: 10 + 5 <= 15"
	}
	if s.TryUpdate([]byte("k"), 6, 15) {
		return "Hi 10, at 10: TryUpdate(6, limit 15) admitted: 10 + 6 > 15"
	}
	return ""
}

// a3mWitNonFinite: NaN/±Inf delta (Update) or limit (TryUpdate) panics
// with "sketch:" and leaves the key's cells as they were.
func a3mWitNonFinite(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_000_000)
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Lo: -1e6, Hi: 1e6, Clock: clk})
	k := []byte("victim")
	s.Update(k, 42)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for name, op := range map[string]func(){
			"Update":          func() { s.Update(k, v) },
			"TryUpdate/limit": func() { s.TryUpdate(k, 1, v) },
		} {
			msg := sketchtest.Panics(op)
			if !strings.HasPrefix(msg, "sketch:") {
				return fmt.Sprintf("%s(%v) panicked with %q, want a \"sketch:\" message", name, v, msg)
			}
			if got := s.Query(k); got != 42 {
				return fmt.Sprintf("%s(%v) changed the key: %v, want 42", name, v, got)
			}
		}
	}
	return ""
}

// a3mWitHiInf: Hi = +Inf (a draining law): a huge delta reads MaxFloat32, finite.
func a3mWitHiInf(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: math.Inf(1), Decay: decay.Exponential(1), Clock: a3mFake(1000)})
	s.Update([]byte("k"), 1e39)
	if got := s.Query([]byte("k")); math.IsInf(got, 0) || math.IsNaN(got) || got != math.MaxFloat32 {
		return fmt.Sprintf("Hi = +Inf: Query = %v after +1e39, want MaxFloat32", got)
	}
	return ""
}

// a3mWitBackStep: Linear(1): 50, 5 s on reads 45; a step back of 10 s
// leaves 45 (zero elapsed: neither growth nor decay).
func a3mWitBackStep(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(10_000_000)
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
	s.Update([]byte("k"), 50)
	clk.Advance(5 * time.Second)
	q := s.Query([]byte("k"))
	clk.Advance(-10 * time.Second)
	if got := s.Query([]byte("k")); got != q {
		return fmt.Sprintf("a 10 s step back moved Query from %v to %v (zero elapsed time wanted)", q, got)
	}
	return ""
}

// a3mWitIdle: idle 2^32 ms + 5 s under Linear(1) drains 50 to 0; idle
// 99 days under Exponential(1e-7) reads the law's value (within 1e-4).
func a3mWitIdle(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(10_000_000)
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
	s.Update([]byte("k"), 50)
	clk.Advance(time.Duration(1<<32+5000) * time.Millisecond)
	if got := s.Query([]byte("k")); got != 0 {
		return fmt.Sprintf("Linear(1): 50 idle 2^32 ms + 5 s reads %v, want 0", got)
	}
	law := decay.Exponential(1e-7)
	clk2 := a3mFake(10_000_000)
	s2 := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: clk2})
	s2.Update([]byte("k"), 100)
	idle := 99 * 24 * time.Hour
	clk2.Advance(idle)
	want := law.Apply(100, idle.Milliseconds())
	if got := s2.Query([]byte("k")); got < want || got > want*(1+1e-4) {
		return fmt.Sprintf("Exponential(1e-7): 100 idle 99 days reads %v, the law gives %v", got, want)
	}
	return ""
}

// a3mWitAllocs: no allocation on the hot methods, for a 9-byte and a
// 64-byte key.
func a3mWitAllocs(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_000_000)
	s := f(t, sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e9, Decay: decay.Exponential(0.01), Clock: clk})
	for _, ks := range []string{"alloc-key", strings.Repeat("long-key", 8)} {
		kb := []byte(ks)
		var sink float64
		ops := []struct {
			name string
			f    func()
		}{
			{"Update", func() { s.Update(kb, 1) }},
			{"Query", func() { sink += s.Query(kb) }},
			{"UpdateAndQuery", func() { sink += s.UpdateAndQuery(kb, 1) }},
			{"TryUpdate", func() { s.TryUpdate(kb, 1, 1e9) }},
			{"UpdateString", func() { s.UpdateString(ks, 1) }},
			{"QueryString", func() { sink += s.QueryString(ks) }},
			{"UpdateAndQueryString", func() { sink += s.UpdateAndQueryString(ks, 1) }},
			{"TryUpdateString", func() { s.TryUpdateString(ks, 1, 1e9) }},
		}
		for _, op := range ops {
			if n := testing.AllocsPerRun(50, func() { clk.Advance(time.Millisecond); op.f() }); n != 0 {
				return fmt.Sprintf("%s with a %d-byte key: %v allocations per call", op.name, len(ks), n)
			}
		}
		_ = sink
	}
	return ""
}

// a3mWitTwins: the string twins do what the []byte forms do (no decay).
func a3mWitTwins(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9})
	s.UpdateString("a", 5)
	if got := s.Query([]byte("a")); got != 5 {
		return fmt.Sprintf("UpdateString(a, 5): Query(a) = %v", got)
	}
	s.Update([]byte("b"), 7)
	if q, qs := s.Query([]byte("b")), s.QueryString("b"); q != qs {
		return fmt.Sprintf("Query(b) = %v, QueryString(b) = %v", q, qs)
	}
	if got := s.UpdateAndQueryString("c", 3); got != 3 {
		return fmt.Sprintf("UpdateAndQueryString(c, 3) on a fresh key = %v, want 3", got)
	}
	return ""
}

// a3mWitDetail: (a) no decay, 64 keys, M 8: two keys that report the same
// cell at a level report the same score there; (b) Linear(1): 50, 5 s on,
// every level reads 45 and Score is the Min of the levels.
func a3mWitDetail(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 4, CellsPerLevel: 8, Hi: 1e9})
	for j := range 64 {
		s.Update([]byte(fmt.Sprint("key-", j)), float64(j%7+1))
	}
	type cell struct{ level, index uint32 }
	seen := map[cell]float64{}
	for j := range 64 {
		for _, lv := range s.QueryDetailed([]byte(fmt.Sprint("key-", j))).Levels {
			c := cell{lv.Level, lv.Index}
			if v, ok := seen[c]; ok && v != lv.Score {
				return fmt.Sprintf("two keys report cell (level %d, index %d) with scores %v and %v", c.level, c.index, v, lv.Score)
			}
			seen[c] = lv.Score
		}
	}
	clk := a3mFake(1_000_000)
	s2 := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
	s2.Update([]byte("d"), 50)
	clk.Advance(5 * time.Second)
	d := s2.QueryDetailed([]byte("d"))
	lmin := math.Inf(1)
	for _, lv := range d.Levels {
		lmin = min(lmin, lv.Score)
		if lv.Score != 45 {
			return fmt.Sprintf("Linear(1), 50 five seconds ago: level %d reads %v, want 45 (decayed to the call)", lv.Level, lv.Score)
		}
	}
	if d.Score != lmin || d.Score != s2.Query([]byte("d")) {
		return fmt.Sprintf("Score %v, Min of levels %v, Query %v", d.Score, lmin, s2.Query([]byte("d")))
	}
	return ""
}

// a3mWitClamp: Lo -5, Hi 0.1 (no float32 holds it): +1e6 reads Hi,
// never above; -1e6 then reads Lo.
func a3mWitClamp(t testing.TB, f sketchtest.Factory) string {
	s := f(t, sketch.Config{Levels: 4, CellsPerLevel: 64, Lo: -5, Hi: 0.1})
	k := []byte("clamp")
	s.Update(k, 1e6)
	if got := s.Query(k); got != 0.1 {
		return fmt.Sprintf("Hi 0.1: Query after +1e6 = %.17g, want 0.1", got)
	}
	if got := s.UpdateAndQuery(k, -1e6); got != -5 {
		return fmt.Sprintf("Lo -5: UpdateAndQuery(-1e6) from Hi = %v, want -5", got)
	}
	return ""
}

// a3mWitAtTime: Linear(10): UpdateAt(T, 100), the clock 2 s on, no other
// call: QueryAt(T + 1 s) = 90.
func a3mWitAtTime(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_700_000_000_000)
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(10), Clock: clk})
	a, ok := s.(sketchtest.AtScorer)
	if !ok {
		return "no At forms"
	}
	T := clk.Now()
	a.UpdateAt(T, "k", 100)
	clk.Advance(2 * time.Second)
	if got := a.QueryAt(T.Add(time.Second), "k"); got != 90 {
		return fmt.Sprintf("QueryAt(T + 1 s) = %v, want 90 (100 at 10/s, written at T)", got)
	}
	return ""
}

// a3mWitAtFuture: Linear(10): UpdateAt(now + 1 h, f, 100); a second on
// the key reads 90 (the future time counted as the clock's reading).
func a3mWitAtFuture(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_700_000_000_000)
	s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(10), Clock: clk})
	a, ok := s.(sketchtest.AtScorer)
	if !ok {
		return "no At forms"
	}
	a.UpdateAt(clk.Now().Add(time.Hour), "f", 100)
	clk.Advance(time.Second)
	if got := s.QueryString("f"); got != 90 {
		return fmt.Sprintf("UpdateAt(now + 1 h, 100), a second on: Query = %v, want 90 (decay never stopped)", got)
	}
	return ""
}

// a3mWitGoroutines: building 20 scorers starts no goroutine.
func a3mWitGoroutines(t testing.TB, f sketchtest.Factory) string {
	n0 := runtime.NumGoroutine()
	for range 20 {
		s := f(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Clock: a3mFake(0)})
		s.Update([]byte("k"), 1)
	}
	if d := runtime.NumGoroutine() - n0; d >= 10 {
		return fmt.Sprintf("20 scorers: %d more goroutines", d)
	}
	return ""
}

type a3mCountClock struct {
	c *sketchtest.FakeClock
	n atomic.Int64
}

func (c *a3mCountClock) NowMillis() int64 { c.n.Add(1); return c.c.NowMillis() }

// TestAudit3MutSketchReadsClockOnce: the sketch's hot operations read
// the clock once each (package sketch's doc; the suite does not check it,
// since the reference rotator reads it per generation, as grudge does).
func TestAudit3MutSketchReadsClockOnce(t *testing.T) {
	if v := a3mWitClockOnce(t, a3mRealSketch); v != "" {
		t.Fatal(v)
	}
}

// a3mWitClockOnce: each hot operation reads the clock once.
func a3mWitClockOnce(t testing.TB, f sketchtest.Factory) string {
	cc := &a3mCountClock{c: a3mFake(1_000_000)}
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Clock: cc})
	k := []byte("k")
	for _, op := range []struct {
		name string
		f    func()
	}{
		{"Update", func() { s.Update(k, 1) }},
		{"Query", func() { s.Query(k) }},
		{"UpdateAndQuery", func() { s.UpdateAndQuery(k, 1) }},
		{"TryUpdate", func() { s.TryUpdate(k, 1, 1e6) }},
		{"UpdateAndQueryString", func() { s.UpdateAndQueryString("k", 1) }},
	} {
		n0 := cc.n.Load()
		op.f()
		if n := cc.n.Load() - n0; n != 1 {
			return fmt.Sprintf("%s read the clock %d times", op.name, n)
		}
	}
	return ""
}

func a3mRealRotator1h(t testing.TB, cfg sketch.Config) sketch.Scorer {
	r, err := rotator.New(rotator.Config{Sketch: cfg, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// a3mWitForgets: a rotator (N 2, Period 1 h: the real one is built so; the
// mutant ignores it) has forgotten a write 2 h 1 s after it.
func a3mWitForgets(t testing.TB, f sketchtest.Factory) string {
	clk := a3mFake(1_000_000)
	s := f(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Clock: clk})
	s.Update([]byte("k"), 100)
	clk.Advance(2*time.Hour + time.Second)
	if got := s.Query([]byte("k")); got != 0 {
		return fmt.Sprintf("a write 2 h 1 s old still reads %v (N 2 x Period 1 h)", got)
	}
	return ""
}
