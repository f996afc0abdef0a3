package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

func newFake(t testing.TB, lim limit.Limit, burst int, opts ...limit.Option) (*limit.Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// engines are the engines the engine-level tests run on.
var engines = []limit.Engine{limit.Buckets, limit.CountMin}

// forEngines runs f once per engine, as a subtest named after it, with
// the option that selects it.
func forEngines(t *testing.T, f func(t *testing.T, eng limit.Option)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) { f(t, limit.WithEngine(e)) })
	}
}

// drawEngine draws an engine for a rapid test: Auto (Buckets where it is
// exact), or the count-min.
func drawEngine(rt *rapid.T) limit.Option {
	return limit.WithEngine(rapid.SampledFrom([]limit.Engine{limit.Auto, limit.CountMin}).Draw(rt, "engine"))
}

func TestBurstThenRate(t *testing.T) { forEngines(t, testBurstThenRate) }

func testBurstThenRate(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 10, 5, eng)
	for i := range 5 {
		if !l.Allow("k") {
			t.Fatalf("request %d of the burst denied", i)
		}
	}
	if l.Allow("k") {
		t.Fatal("request past the burst admitted")
	}
	if !l.Allow("other") {
		t.Fatal("another key denied")
	}
	clk.Advance(99 * time.Millisecond)
	if l.Allow("k") {
		t.Fatal("admitted before one token drained (99ms at 10/s)")
	}
	clk.Advance(time.Millisecond)
	if !l.Allow("k") {
		t.Fatal("denied after one token drained (100ms at 10/s)")
	}
}

// A request retried exactly at RetryAfter is admitted; 1 ms earlier it is
// not. Checked over random rates, bursts, sizes and histories.
func TestRetryAfterExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rate := rapid.Float64Range(0.01, 5000).Draw(rt, "rate")
		burst := rapid.IntRange(1, 1000).Draw(rt, "burst")
		eng := drawEngine(rt)
		if rapid.Bool().Draw(rt, "buckets") {
			lim, _, maxBurst := bucketRate(rt)
			rate, burst, eng = float64(lim), rapid.IntRange(1, maxBurst).Draw(rt, "bucketBurst"), limit.WithEngine(limit.Buckets)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "start"))
		l, err := limit.New(limit.Limit(rate), burst, limit.WithClock(clk), limit.WithSeed(7), eng)
		if err != nil {
			rt.Fatal(err)
		}
		// A history: requests at random gaps until one is denied.
		var d limit.Decision
		for i := 0; ; i++ {
			n := rapid.IntRange(1, burst).Draw(rt, "n")
			clk.Advance(time.Duration(rapid.IntRange(0, 50).Draw(rt, "gap")) * time.Millisecond)
			d = l.DecideN(clk.Now(), "k", n)
			if !d.Allowed {
				ra := d.RetryAfter
				if ra < time.Millisecond || ra == limit.InfDuration {
					rt.Fatalf("denied with RetryAfter %v", ra)
				}
				start := clk.Now()
				clk.SetTime(start.Add(ra - time.Millisecond))
				if l.AllowN(clk.Now(), "k", n) {
					rt.Fatalf("admitted 1ms before RetryAfter %v (rate %v, burst %d, n %d)", ra, rate, burst, n)
				}
				clk.SetTime(start.Add(ra))
				if !l.AllowN(clk.Now(), "k", n) {
					rt.Fatalf("denied at RetryAfter %v (rate %v, burst %d, n %d)", ra, rate, burst, n)
				}
				return
			}
			if i > 10000 {
				rt.Fatal("never denied")
			}
		}
	})
}

// The limiter against a closed-form per-key model: each key's debt is
// max(debt - rate*dt, 0) + n on admission. With roomy cells (no
// collisions) the decisions agree with the model up to float32 rounding;
// with every key forced to collide (M = 1 or 2) the limiter only errs on
// the safe side: it never admits a key past its own limit. The Buckets
// engine, at rates where it is exact, agrees with the model exactly.
func TestModel(t *testing.T) {
	t.Run("buckets", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			lim, r, maxBurst := bucketRate(rt)
			burst := rapid.IntRange(1, min(maxBurst, 50)).Draw(rt, "burst")
			clk := sketchtest.NewFakeClock()
			l, err := limit.New(lim, burst, limit.WithClock(clk), limit.WithSeed(rapid.Uint64().Draw(rt, "seed")),
				limit.WithStrict(rapid.Bool().Draw(rt, "strict")), limit.WithEngine(limit.Buckets))
			if err != nil {
				rt.Fatal(err)
			}
			model := map[string]*bucket{}
			keys := []string{"a", "b", "c", "d"}
			for _, k := range keys {
				model[k] = newBucket(r, burst)
				model[k].at = clk.NowMillis()
			}
			for range rapid.IntRange(1, 300).Draw(rt, "ops") {
				clk.Advance(time.Duration(rapid.IntRange(0, 200).Draw(rt, "gap")) * time.Millisecond)
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				n := rapid.IntRange(1, burst+1).Draw(rt, "n")
				m := model[k]
				m.advance(clk.NowMillis())
				want := n <= burst && m.fits(n)
				if got := l.AllowN(clk.Now(), k, n); got != want {
					rt.Fatalf("%q n=%d: Allowed %v, exact bucket %v (debt %v, burst %d)", k, n, got, want, m.debt.FloatString(6), burst)
				}
				if want {
					m.debt.Add(m.debt, rat(int64(n)))
				}
			}
		})
	})
	for _, cells := range []uint32{1, 2, 1 << 12} {
		t.Run(fmt.Sprintf("cells=%d", cells), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				rate := rapid.Float64Range(0.5, 1000).Draw(rt, "rate")
				burst := rapid.IntRange(1, 50).Draw(rt, "burst")
				strict := rapid.Bool().Draw(rt, "strict")
				clk := sketchtest.NewFakeClock()
				l, err := limit.New(limit.Limit(rate), burst, limit.WithClock(clk),
					limit.WithSize(map[bool]uint32{true: 4, false: 2}[cells > 2], cells), limit.WithSeed(rapid.Uint64().Draw(rt, "seed")), limit.WithStrict(strict),
					limit.WithPrefetch(rapid.Bool().Draw(rt, "prefetch")), limit.WithConservativeUpdate(rapid.Bool().Draw(rt, "conservative")))
				if err != nil {
					rt.Fatal(err)
				}
				type st struct {
					debt float64
					at   int64
				}
				model := map[string]*st{}
				keys := []string{"a", "b", "c", "d"}
				for range rapid.IntRange(1, 300).Draw(rt, "ops") {
					clk.Advance(time.Duration(rapid.IntRange(0, 200).Draw(rt, "gap")) * time.Millisecond)
					k := rapid.SampledFrom(keys).Draw(rt, "key")
					n := rapid.IntRange(1, burst+1).Draw(rt, "n")
					now := clk.NowMillis()
					m := model[k]
					if m == nil {
						m = &st{at: now}
						model[k] = m
					}
					m.debt = math.Max(m.debt-rate*float64(now-m.at)/1000, 0)
					m.at = now
					ok := l.AllowN(clk.Now(), k, n)
					fitsModel := m.debt+float64(n) <= float64(burst)+1e-9
					if ok && !fitsModel {
						rt.Fatalf("admitted %q n=%d past its own limit: model debt %v, burst %d", k, n, m.debt, burst)
					}
					if cells == 1<<12 && !ok && m.debt+float64(n) <= float64(burst)-1e-3*float64(burst) {
						rt.Fatalf("denied %q n=%d with model debt %v, burst %d (no collisions)", k, n, m.debt, burst)
					}
					if ok {
						m.debt += float64(n)
					}
				}
			})
		})
	}
}

// Strict mode is exact under contention: with time frozen, exactly burst
// admissions of one key, whatever the number of goroutines and
// GOMAXPROCS; and a Multi admits exactly its tightest window.
func TestStrictSentinel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	attempts, burst := 400, 1000 // 8 goroutines x attempts > burst
	if testing.Short() {
		attempts, burst = 100, 500
	}
	for _, tc := range []struct {
		procs    int
		prefetch bool
		engine   limit.Engine
		cu       bool // the count-min's conservative update (its Multi refunds give nothing back)
	}{
		{1, true, limit.CountMin, false}, {2, true, limit.CountMin, false}, {4, true, limit.CountMin, false}, {8, true, limit.CountMin, false},
		{2, false, limit.CountMin, false}, {8, false, limit.CountMin, false}, {2, true, limit.CountMin, true}, {8, true, limit.CountMin, true},
		{1, true, limit.Buckets, false}, {2, true, limit.Buckets, false}, {4, true, limit.Buckets, false}, {8, true, limit.Buckets, false},
	} {
		procs := tc.procs
		runtime.GOMAXPROCS(procs)
		t.Run(fmt.Sprintf("procs=%d/prefetch=%v/%v/cu=%v", procs, tc.prefetch, tc.engine, tc.cu), func(t *testing.T) {
			// Time is frozen: 100/s drains nothing (and lets Buckets hold
			// a MaxDebt of 2 x burst: 20 s of drain at most).
			opts := []limit.Option{limit.WithEngine(tc.engine)}
			if tc.engine == limit.CountMin {
				opts = append(opts, limit.WithSize(4, 64), limit.WithPrefetch(tc.prefetch), limit.WithConservativeUpdate(tc.cu))
			}
			l, _ := newFake(t, 100, burst, opts...)
			w1, _ := newFake(t, 100, burst, limit.WithEngine(tc.engine), limit.WithConservativeUpdate(tc.cu))
			w2, _ := newFake(t, 100, burst/2, limit.WithEngine(tc.engine), limit.WithConservativeUpdate(tc.cu))
			if l.Engine() != tc.engine || w1.Engine() != tc.engine {
				t.Fatalf("engines %v, %v; want %v", l.Engine(), w1.Engine(), tc.engine)
			}
			m, err := limit.NewMulti(w1, w2)
			if err != nil {
				t.Fatal(err)
			}
			var got, gotMulti atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					key := "hot"
					for i := range attempts {
						if l.Allow(key) {
							got.Add(1)
						}
						if m.DecideKeys(w1.Now(), 1, "hot").Allowed {
							gotMulti.Add(1)
						}
						_ = l.Allow(fmt.Sprint("cold", g, i%3)) // traffic on other keys
					}
				})
			}
			wg.Wait()
			if got.Load() != int64(burst) {
				t.Fatalf("admitted %d, want exactly %d", got.Load(), burst)
			}
			if gotMulti.Load() != int64(burst/2) {
				t.Fatalf("Multi admitted %d, want exactly %d", gotMulti.Load(), burst/2)
			}
			// Peek reports what Decide would: Remaining after the request.
			// The count-min gives every take of a denied Multi back (the
			// same millisecond, below MaxDebt). The Buckets engine gives a
			// take back only if nothing wrote the key's entry since, and
			// reads its later windows first, so only a caller that took
			// window 1 while another's admission landed on top of it, and
			// was then denied by window 2 (which the other filled), keeps
			// its take: at most one per goroutine but one, at that boundary.
			want := burst - burst/2 - 1
			r := w1.PeekN(w1.Now(), "hot", 1).Remaining
			// Conservative update gives nothing back at all, and is read
			// first as the Buckets engine is.
			if (tc.engine == limit.Buckets || tc.cu) && r < want && r >= want-7 {
				t.Logf("window 1 kept %d takes of denied Multi calls (the boundary race)", want-r)
				r = want
			}
			if r != want {
				t.Fatalf("window 1 has %d remaining after one more request, want %d (denials by window 2 must debit none)", r, want)
			}
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	for _, prefetch := range []bool{true, false} {
		l, _ := newFake(t, 1, 3, limit.WithRejectCost(1), limit.WithPrefetch(prefetch), limit.WithEngine(limit.CountMin))
		zeroAllocs(t, l, limit.WithEngine(limit.CountMin))
	}
	l, _ := newFake(t, 1, 3, limit.WithRejectCost(1), limit.WithEngine(limit.Buckets))
	zeroAllocs(t, l, limit.WithEngine(limit.Buckets))
}

func zeroAllocs(t *testing.T, l *limit.Limiter, eng limit.Option) {
	now := l.Now()
	for name, f := range map[string]func(){
		"Allow":   func() { l.Allow("string-key") },
		"AllowN":  func() { l.AllowN(now, "n-key", 1) },
		"DecideN": func() { l.DecideN(now, "d-key", 1) },
		"PeekN":   func() { l.PeekN(now, "w-key", 1) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 { // admitted, then denied
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
	opt, _ := newFake(t, 1, 3, limit.WithStrict(false), eng)
	if a := testing.AllocsPerRun(100, func() { opt.Allow("o") }); a != 0 {
		t.Errorf("optimistic AllowString: %v allocs/op, want 0", a)
	}
}

func TestDecision(t *testing.T) { forEngines(t, testDecision) }

func testDecision(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 2, 4, eng)
	d := l.DecideN(clk.Now(), "k", 3)
	if !d.Allowed || d.Remaining != 1 || d.RetryAfter != 0 || d.ResetAfter != 1500*time.Millisecond || d.Burst != 4 || d.Limit != 2 {
		t.Fatalf("first decision %+v", d)
	}
	d = l.DecideN(clk.Now(), "k", 2)
	// debt 3, n 2, burst 4: 1 token must drain at 2/s: 500ms.
	if d.Allowed || d.RetryAfter != 500*time.Millisecond || d.Remaining != 1 || d.Never {
		t.Fatalf("denial %+v", d)
	}
	d = l.DecideN(clk.Now(), "k", 5)
	if d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration {
		t.Fatalf("n > burst: %+v", d)
	}
	if l.AllowN(clk.Now(), "fresh", 5) {
		t.Fatal("AllowN(n > burst) admitted")
	}
}

// Peek and WouldAllow never write: repeated, they change nothing, and
// charge no RejectCost.
func TestPeekReadOnly(t *testing.T) { forEngines(t, testPeekReadOnly) }

func testPeekReadOnly(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 1, 3, limit.WithRejectCost(2), eng)
	l.AllowN(clk.Now(), "k", 3)
	before := l.PeekN(clk.Now(), "k", 1)
	for range 100 {
		l.PeekN(clk.Now(), "k", 1)
		l.Peek("k")
		l.PeekN(clk.Now(), "k", 10)
	}
	after := l.PeekN(clk.Now(), "k", 1)
	if before != after || before.Allowed || before.RetryAfter != time.Second {
		t.Fatalf("Peek moved: before %+v after %+v", before, after)
	}
	if p := l.PeekN(clk.Now(), "new", 2); !p.Allowed || p.Remaining != 1 {
		t.Fatalf("Peek of a fresh key %+v", p)
	}
	if l.PeekN(clk.Now(), "new", 3).Remaining != 0 || !l.PeekN(l.Now(), "new", 3).Allowed {
		t.Fatal("Peek debited the fresh key")
	}
}

func TestRejectCost(t *testing.T) { forEngines(t, testRejectCost) }

func testRejectCost(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 1, 2, limit.WithRejectCost(1), limit.WithMaxDebt(5), eng)
	l.AllowN(clk.Now(), "k", 2)
	var d limit.Decision
	for range 20 {
		d = l.DecideN(clk.Now(), "k", 1)
	}
	// debt is capped at MaxDebt 5: retry when it drains to 1: 4 s.
	if d.Allowed || d.RetryAfter != 4*time.Second || d.ResetAfter != 5*time.Second {
		t.Fatalf("after 20 penalized denials %+v", d)
	}
	if _, err := limit.New(1, 2, limit.WithRejectCost(6), limit.WithMaxDebt(5)); err == nil {
		t.Fatal("RejectCost above MaxDebt accepted")
	}
}

func TestOptimistic(t *testing.T) { forEngines(t, testOptimistic) }

func testOptimistic(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 10, 3, limit.WithStrict(false), eng)
	for i := range 3 {
		if !l.Allow("k") {
			t.Fatalf("request %d denied", i)
		}
	}
	if l.Allow("k") || l.DecideN(clk.Now(), "k", 1).RetryAfter != 100*time.Millisecond {
		t.Fatal("optimistic mode past the burst")
	}
}

func TestReservation(t *testing.T) { forEngines(t, testReservation) }

func testReservation(t *testing.T, eng limit.Option) {
	l, clk := newFake(t, 10, 2, eng) // MaxDebt 4: up to 2 tokens queued (200ms)
	r := l.ReserveN(clk.Now(), "k", 2)
	if !r.OK() || r.DelayFrom(clk.Now()) != 0 {
		t.Fatalf("first reservation ok=%v delay=%v", r.OK(), r.DelayFrom(clk.Now()))
	}
	r2 := l.ReserveN(clk.Now(), "k", 1)
	if !r2.OK() || r2.DelayFrom(clk.Now()) != 100*time.Millisecond {
		t.Fatalf("queued reservation ok=%v delay=%v", r2.OK(), r2.DelayFrom(clk.Now()))
	}
	r3 := l.ReserveN(clk.Now(), "k", 2)
	if r3.OK() || r3.DelayFrom(clk.Now()) != limit.InfDuration {
		t.Fatal("reservation past MaxDebt is OK")
	}
	r3.Cancel() // no-op
	r2.Cancel()
	r2.Cancel() // idempotent
	r.Cancel()
	if d := l.PeekN(clk.Now(), "k", 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after cancelling everything %+v", d)
	}
	if l.ReserveN(clk.Now(), "k", 3).OK() {
		t.Fatal("reservation of n > burst OK")
	}
}

func TestWaitN(t *testing.T) { forEngines(t, testWaitN) }

func testWaitN(t *testing.T, eng limit.Option) {
	l, err := limit.New(100, 1, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	for range 3 {
		if err := l.WaitN(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Fatalf("3 waits at 100/s, burst 1 took %v, want >= 20ms", el)
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	l.Allow("j")
	if err := l.WaitN(short, "j", 1); err == nil {
		t.Fatal("WaitN past the deadline succeeded")
	}
	if err := l.WaitN(ctx, "j", 2); err == nil || !strings.HasPrefix(err.Error(), "limit: ") {
		t.Fatalf("WaitN(n > burst) = %v", err)
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if err := l.WaitN(done, "z", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN on a cancelled context = %v", err)
	}
}

func TestMultiAllOrNothing(t *testing.T) { forEngines(t, testMultiAllOrNothing) }

// testMultiAllOrNothing: the per-hour window is always the count-min
// (MaxDebt drains in 2 h), so with Buckets the Multi mixes engines.
func testMultiAllOrNothing(t *testing.T, eng limit.Option) {
	perSec, clk := newFake(t, 10, 10, eng)
	perHour, _ := newFake(t, limit.Every(time.Hour/1000), 1000, limit.WithClock(clk))
	m, err := limit.NewMulti(perSec, perHour)
	if err != nil {
		t.Fatal(err)
	}
	if !m.AllowN(clk.Now(), "u", 10) {
		t.Fatal("denied within both windows")
	}
	if m.AllowN(clk.Now(), "u", 1) {
		t.Fatal("admitted past the per-second window")
	}
	if r := perHour.PeekN(clk.Now(), "u", 1).Remaining; r != 989 {
		t.Fatalf("per-hour window has %d remaining, want 990 (a denial debits none)", r)
	}
	// per-user and per-tenant: the tenant window denies, the user keeps its tokens.
	user, _ := newFake(t, 1, 5, limit.WithClock(clk), eng)
	tenant, _ := newFake(t, 1, 3, limit.WithClock(clk), eng)
	mt, _ := limit.NewMulti(user, tenant)
	d := mt.DecideKeys(clk.Now(), 3, "alice", "acme")
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("first %+v", d)
	}
	d = mt.DecideKeys(clk.Now(), 1, "bob", "acme")
	if d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("tenant denial %+v", d)
	}
	if r := user.PeekN(clk.Now(), "bob", 1).Remaining; r != 4 {
		t.Fatalf("bob debited %d by a denied request", 4-r)
	}
	if _, err := limit.NewMulti(); err == nil {
		t.Fatal("empty Multi accepted")
	}
}

// A key maxed out then silent is not amnestied by rotation: its debt is
// read as drained no earlier than the linear law says, across many
// rotations (the count-min's; the Buckets engine does not rotate).
func TestNoAmnesty(t *testing.T) {
	l, _ := newFake(t, 1, 10, limit.WithMaxDebt(10), limit.WithEngine(limit.CountMin))
	if want := 16 * 10 * time.Second; l.Period() != want {
		t.Fatalf("Period %v, want %v", l.Period(), want)
	}
	if _, err := limit.New(1, 10, limit.WithMaxDebt(10), limit.WithPeriod(9*time.Second)); err == nil {
		t.Fatal("a Period that could amnesty accepted")
	}
	// Minimal period: the tightest case.
	l, clk := newFake(t, 1, 10, limit.WithMaxDebt(10), limit.WithPeriod(10*time.Second)) // selects the count-min
	for step := range 100 {
		clk.Advance(time.Duration(step%7) * time.Second)
		l.AllowN(clk.Now(), "x", 10) // maxed out when admitted
		// Right after, the key must wait the full drain of what it owes.
		d := l.PeekN(clk.Now(), "x", 10)
		if d.Allowed {
			t.Fatalf("step %d: a maxed-out key admitted again at once", step)
		}
	}
	// Maxed out at T, then silent through every rotation of the drain.
	clk.Advance(20 * time.Second)
	if !l.AllowN(clk.Now(), "x", 10) {
		t.Fatal("a drained key denied")
	}
	for range 9999 {
		clk.Advance(time.Millisecond)
		if l.PeekN(l.Now(), "x", 10).Allowed {
			t.Fatal("a maxed-out silent key admitted before its debt drained")
		}
	}
	clk.Advance(time.Millisecond)
	if !l.AllowN(clk.Now(), "x", 10) {
		t.Fatal("denied after its debt drained")
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
		opts  []limit.Option
		want  string
	}{
		{1, 0, nil, "limit: burst must be > 0; got 0"},
		{1, -3, nil, "limit: burst must be > 0; got -3"},
		{limit.Limit(math.NaN()), 1, nil, "limit: limit must be > 0"},
		{0, 1, nil, "limit: limit must be > 0"},
		{-1, 1, nil, "limit: limit must be > 0"},
		{1, 1, []limit.Option{limit.WithRejectCost(math.NaN())}, "limit: RejectCost"},
		{1, 2, []limit.Option{limit.WithMaxDebt(1)}, "limit: MaxDebt"},
		{1, 1, []limit.Option{limit.WithSize(9, 0)}, "limit: Levels"}, // a *sketch.ConfigError restated as limit's (audit 105)
		{1, 1, []limit.Option{limit.WithGenerations(1)}, "limit: Generations"},
	} {
		_, err := limit.New(c.lim, c.burst, c.opts...)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("New(%v, %d): %v, want %q", c.lim, c.burst, err, c.want)
		}
	}
	l, clk := newFake(t, 1, 1)
	for name, f := range map[string]func(){
		"AllowN":   func() { l.AllowN(clk.Now(), "k", 0) },
		"Decide":   func() { l.DecideN(clk.Now(), "k", -1) },
		"ReserveN": func() { l.ReserveN(clk.Now(), "k", 0) },
		"WaitN":    func() { _ = l.WaitN(context.Background(), "k", 0) },
		"PeekN":    func() { l.PeekN(clk.Now(), "k", 0) },
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "limit: ") || !strings.Contains(s, "n must be > 0") {
					t.Errorf("%s(n <= 0) panicked with %v", name, r)
				}
			}()
			f()
		}()
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustNew(burst 0) did not panic")
		}
	}()
	limit.MustNew(1, 0)
}

func TestInf(t *testing.T) {
	l := limit.MustNew(limit.Inf, 1)
	for range 100 {
		if !l.Allow("k") {
			t.Fatal("Inf denied")
		}
	}
	if limit.Every(0) != limit.Inf || limit.Every(100*time.Millisecond) != 10 {
		t.Fatal("Every")
	}
	if d := l.DecideN(time.Now(), "k", 1000); !d.Allowed {
		t.Fatalf("Inf decision %+v", d)
	}
}
