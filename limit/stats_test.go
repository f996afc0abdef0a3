package limit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestSaturation: Stats().Saturation, read after keys took their whole
// burst at one instant, is within 20% of the share of 100,000 fresh keys
// that would be denied one token (Peek), on both engines, wherever that
// share rests on 1,000 denials or more; and both are 0 on an empty
// limiter.
func TestSaturation(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		name string
		opts []limit.Option
		keys []int
	}{
		// 4 x 8192 cells: a fresh key is denied 2% to 92% of the time.
		{"count-min", []limit.Option{limit.WithSize(4, 8192)}, []int{4000, 8000, 16000, 32000}},
		// Sized for 10,000 keys at 1%: below, at and past the cliff.
		{"buckets", []limit.Option{limit.WithCapacity(10_000, 0.01), limit.WithEngine(limit.Buckets)}, []int{10_000, 12_000, 13_000, 14_000, 20_000}},
	} {
		for _, n := range c.keys {
			t.Run(fmt.Sprintf("%s/keys=%d", c.name, n), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(5)}, c.opts...)...)
				if s := l.Stats().Saturation; s != 0 {
					t.Fatalf("empty limiter: saturation %v", s)
				}
				for i := range n {
					l.AllowN(clk.Now(), fmt.Sprint("held-", i), 20)
				}
				st := l.Stats()
				const fresh = 100_000
				denied := 0
				for i := range fresh {
					if !l.PeekN(clk.Now(), fmt.Sprint("fresh-", i), 1).Allowed {
						denied++
					}
				}
				rate := float64(denied) / fresh
				t.Logf("%s, %d keys: saturation %.4f, measured %.4f (%d denied)", c.name, n, st.Saturation, rate, denied)
				if denied >= 1000 && math.Abs(st.Saturation-rate) > 0.2*rate {
					t.Fatalf("saturation %.4f, measured %.4f: more than 20%% off", st.Saturation, rate)
				}
				if denied < 1000 && st.Saturation > 0.05 {
					t.Fatalf("saturation %.4f with %d of %d fresh keys denied", st.Saturation, denied, fresh)
				}
			})
		}
	}
}

// TestStats: the fields and their JSON (what expvar serves).
func TestStats(t *testing.T) {
	l := limit.MustNew(10, 20)
	st := l.Stats()
	if st.Engine != limit.Buckets || st.Bytes != l.Sizes().Total || st.Saturation != 0 {
		t.Fatalf("Stats %+v", st)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"Engine":"buckets"`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithEngine(e))
		if a := testing.AllocsPerRun(10, func() { l.Stats() }); a != 0 {
			t.Errorf("%v: Stats allocates %v", e, a)
		}
	}
	if st := limit.MustNew(limit.Inf, 1).Stats(); st != (limit.Stats{}) {
		t.Fatalf("Inf: %+v", st)
	}
	if st := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin)).Stats(); st.Engine != limit.CountMin || st.Saturation != 0 {
		t.Fatalf("count-min: %+v", st)
	}
}

// TestCapacity: Capacity reads Suggest's models the other way. The
// default Buckets limiter holds 1.2M to 1.3M keys at full debt at 1%
// (its cliff, docs/capacity.md), and Suggest for that many fits in it;
// the default count-min holds the Bloom formula's 38,000 (4 levels of
// 100,000 cells); Inf is unbounded; a rate outside (0, 1) panics.
func TestCapacity(t *testing.T) {
	b := limit.MustNew(10, 20)
	c := b.Capacity(0.01)
	s, err := limit.Suggest(c, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	more, err := limit.Suggest(c+c/200, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	lines := b.Sizes().Cells/64 - 1
	if c < 1_200_000 || c > 1_300_000 || s.Buckets.Lines > lines || more.Buckets.Lines <= lines {
		t.Fatalf("Buckets: Capacity(1%%) = %d; Suggest for it %d lines, for 0.5%% more %d; the limiter has %d", c, s.Buckets.Lines, more.Buckets.Lines, lines)
	}
	cm := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	k := cm.Capacity(0.01)
	bloom := func(k int) float64 {
		return math.Pow(-math.Expm1(-float64(k)/100_000), 4) + float64(k)/(100_000*100_000*3)
	} // plus double hashing's pairs
	if bloom(k) > 0.01 || bloom(k+1) <= 0.01 || k < 37_000 || k > 39_000 {
		t.Fatalf("count-min: Capacity(1%%) = %d (formula %v, one more %v)", k, bloom(k), bloom(k+1))
	}
	if got := limit.MustNew(limit.Inf, 1).Capacity(0.5); got != math.MaxInt {
		t.Fatalf("Inf: %d", got)
	}
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "limit: Capacity") {
			t.Fatalf("Capacity(0) panicked with %q", r)
		}
	}()
	b.Capacity(0)
}

// TestStatsCounts: after G goroutines made their decisions concurrently
// (Allow, AllowN, Decide, DecideN, DecideContext, ReserveN, and Peek
// and Tokens in between), Admitted is exactly the number of admissions
// the calls returned and Admitted + Denied exactly the number of
// deciding calls, on both engines, strict and optimistic, at several
// GOMAXPROCS; Peek and Tokens count nothing; a Cancel uncounts nothing;
// the limiter's answers are exact (strict: burst admissions of a key
// whose debt does not drain).
func TestStatsCounts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const goroutines, rounds, burst = 8, 2000, 500
	for _, procs := range []int{1, 2, 4, 8} {
		for _, c := range []struct {
			name string
			opts []limit.Option
		}{
			{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}},
			{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)}},
			{"optimistic", []limit.Option{limit.WithStrict(false)}},
			{"inf", nil},
		} {
			t.Run(fmt.Sprintf("procs=%d/%s", procs, c.name), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				rate := limit.Limit(100) // the clock is frozen: nothing drains
				if c.name == "inf" {
					rate = limit.Inf
				}
				l, clk := newFake(t, rate, burst, c.opts...)
				if st := l.Stats(); st.Admitted != 0 || st.Denied != 0 {
					t.Fatalf("fresh limiter: %+v", st)
				}
				var admitted, calls atomic.Uint64
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						var yes, n uint64
						count := func(ok bool) {
							n++
							if ok {
								yes++
							}
						}
						for i := range rounds {
							key := fmt.Sprint("k", (g+i)%5)
							now := clk.Now()
							switch i % 7 {
							case 0:
								count(l.Allow(key))
							case 1:
								count(l.AllowN(now, key, 1+i%3))
							case 2:
								count(l.Decide(key).Allowed)
							case 3:
								count(l.DecideN(now, key, 2).Allowed)
							case 4:
								d, _ := l.DecideContext(context.Background(), key, 1)
								count(d.Allowed)
							case 5:
								r := l.ReserveN(now, key, 1)
								count(r.OK())
								if i%2 == 0 {
									r.Cancel() // gives back (or not): uncounts nothing
								}
							case 6:
								count(l.AllowN(now, key, burst+1)) // never: denied
							}
							l.Peek(key)
							l.PeekN(now, key, 1)
							l.Tokens(key)
						}
						admitted.Add(yes)
						calls.Add(n)
					})
				}
				wg.Wait()
				st := l.Stats()
				if st.Admitted != admitted.Load() || st.Admitted+st.Denied != calls.Load() {
					t.Fatalf("Stats says %d admitted, %d denied; the calls returned %d admissions of %d", st.Admitted, st.Denied, admitted.Load(), calls.Load())
				}
				if c.name != "inf" && (st.Admitted == 0 || st.Denied == 0) {
					t.Fatalf("the test must see both answers: %+v", st)
				}
				if c.name == "inf" && st.Denied != 0 {
					t.Fatalf("Inf denied: %+v", st)
				}
				t.Logf("%d admitted, %d denied", st.Admitted, st.Denied)
			})
		}
	}
}

// TestStatsWait: WaitN counts once it asks the limiter (admitted when it
// reserves, whether the wait then completes or not; denied when it
// cannot), and not when it returns before.
func TestStatsWait(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(limit.Every(time.Second), 2, limit.WithClock(clk), limit.WithMaxDebt(3))
	want := func(step string, admitted, denied uint64) {
		t.Helper()
		if st := l.Stats(); st.Admitted != admitted || st.Denied != denied {
			t.Fatalf("%s: %d admitted, %d denied; want %d, %d", step, st.Admitted, st.Denied, admitted, denied)
		}
	}
	ctx := context.Background()
	if err := l.WaitN(ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	want("a wait that did not wait", 1, 0)
	if err := l.WaitN(ctx, "k", 3); !errors.Is(err, limit.ErrAboveBurst) {
		t.Fatalf("above the burst: %v", err)
	}
	want("ErrAboveBurst", 1, 1)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.WaitN(done, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("context done: %v", err)
	}
	want("a context already done", 1, 1)
	// A wait that reserves (debt 3: 1 s to wait), then is cancelled:
	// admitted, and stays so.
	wctx, wcancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- l.WaitN(wctx, "k", 1) }()
	clk.BlockUntilTimers(1)
	want("a wait in progress", 2, 1)
	if err := l.WaitN(ctx, "k", 1); !errors.Is(err, limit.ErrMaxDebt) {
		t.Fatalf("past MaxDebt: %v", err)
	}
	want("ErrMaxDebt", 2, 2)
	wcancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	want("a cancelled wait", 2, 2)
	nt := limit.MustNew(1, 1, limit.WithClock(sketchtest.NewFakeClock()))
	if err := nt.WaitN(ctx, "k", 1); !errors.Is(err, limit.ErrNoTimer) {
		t.Fatalf("no timer: %v", err)
	}
	if st := nt.Stats(); st.Admitted != 0 || st.Denied != 0 {
		t.Fatalf("ErrNoTimer counted: %+v", st)
	}
}

// TestStatsRotations: the count-min's Rotations counts the periods it
// rotated through on a fake clock (Stats itself performs a rotation that
// is due; a jump over k periods counts k); the Buckets engine's is 0.
func TestStatsRotations(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
	p := l.Period()
	want := func(step string, n uint64) {
		t.Helper()
		if got := l.Stats().Rotations; got != n {
			t.Fatalf("%s: %d rotations, want %d", step, got, n)
		}
	}
	want("fresh", 0)
	clk.Advance(p - time.Millisecond)
	l.Allow("k")
	want("1 ms before the deadline", 0)
	clk.Advance(time.Millisecond)
	want("at the deadline, no decision since", 1)
	want("read again", 1)
	clk.Advance(3 * p)
	l.Allow("k")
	want("three periods on", 4)
	b := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets))
	b.Allow("k")
	clk.Advance(100 * time.Hour)
	b.Allow("k")
	if st := b.Stats(); st.Rotations != 0 || st.Admitted != 2 {
		t.Fatalf("Buckets: %+v", st)
	}
}

// TestMultiStats: a Multi's decisions count in its Stats (one per call,
// admitted only if every window admitted), not in its windows'; Bytes
// and Rotations sum the windows', Saturation combines theirs.
func TestMultiStats(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	w1 := limit.MustNew(10, 5, limit.WithClock(clk), limit.WithCapacity(1000, 0.01), limit.WithEngine(limit.Buckets))
	w2 := limit.MustNew(10, 3, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
	m, err := limit.NewMulti(w1, w2)
	if err != nil {
		t.Fatal(err)
	}
	yes := 0
	for range 10 {
		if m.AllowN(clk.Now(), "k", 1) {
			yes++
		}
	}
	if d, _ := m.DecideContext(context.Background(), "k", 1); d.Allowed {
		t.Fatal("admitted past the tighter window")
	}
	w1.Allow("direct")
	st := m.Stats()
	if yes != 3 || st.Admitted != 3 || st.Denied != 8 {
		t.Fatalf("%d admitted; Stats %+v", yes, st)
	}
	s1, s2 := w1.Stats(), w2.Stats()
	if s1.Admitted != 1 || s1.Denied != 0 || s2.Admitted != 0 || s2.Denied != 0 {
		t.Fatalf("windows counted the Multi's decisions: %+v, %+v", s1, s2)
	}
	if st.Engine != limit.Auto || st.Bytes != s1.Bytes+s2.Bytes || st.Rotations != 0 || st.Saturation != 0 {
		t.Fatalf("Multi %+v from %+v, %+v", st, s1, s2)
	}
	clk.Advance(w2.Period())
	if st := m.Stats(); st.Rotations != 1 {
		t.Fatalf("Multi rotations %+v", st)
	}
	// Saturation: a fresh key passes only if it passes every window;
	// here w1 is saturated and w2 nearly empty (each reading samples
	// afresh: compare within the sampling's spread).
	for i := range 3000 {
		w1.AllowN(clk.Now(), fmt.Sprint("full-", i), 5)
	}
	s1, s2 = w1.Stats(), w2.Stats()
	if st := m.Stats(); s1.Saturation < 0.05 || s2.Saturation > 0.001 || math.Abs(st.Saturation-s1.Saturation) > 0.2*s1.Saturation {
		t.Fatalf("Multi saturation %v, windows %v, %v", st.Saturation, s1.Saturation, s2.Saturation)
	}
	for _, f := range []func(){
		func() { m.AllowN(clk.Now(), "z", 1) },
		func() { m.DecideKeys(clk.Now(), 1, "z") },
		func() { m.Stats() },
		func() { w1.Stats() },
		func() { w1.Allow("z") },
		func() { w1.DecideN(clk.Now(), "z", 1) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%v allocs/op, want 0", a)
		}
	}
}

// TestStatsTier: a Tier's decisions count in its limiter's Stats, each
// entry point once, Peek not at all.
func TestStatsTier(t *testing.T) {
	for _, engine := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_000_000)
		l := limit.MustNew(10, 4, limit.WithClock(clk), limit.WithMaxDebt(10), limit.WithEngine(engine))
		tr, err := l.Tier("slow", 5, 4) // 200 ms a token: its burst is 8 base tokens of MaxDebt 10
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tr.Allow("k")                  // admitted
		tr.AllowN(clk.Now(), "k", 2)   // admitted
		tr.Decide("k")                 // admitted (4 of 4)
		tr.DecideN(clk.Now(), "k", 1)  // denied
		tr.Peek("k")                   // not counted
		tr.PeekN(clk.Now(), "k", 1)    // not counted
		tr.DecideContext(ctx, "k", 1)  // denied
		tr.ReserveN(clk.Now(), "k", 1) // admitted (a reservation ahead, within MaxDebt)
		if err := tr.WaitN(ctx, "k", 5); !errors.Is(err, limit.ErrAboveBurst) {
			t.Fatalf("%v: WaitN above the burst: %v", engine, err)
		} // denied
		l.Allow("other") // the limiter's own policy counts in the same Stats
		st := l.Stats()
		if st.Admitted != 5 || st.Denied != 3 {
			t.Fatalf("%v: %d admitted, %d denied; want 5, 3", engine, st.Admitted, st.Denied)
		}
	}
}
