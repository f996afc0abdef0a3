package redis

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit21 (independent review of a53f73d): the deny cache's dated debts,
// in-flight stripes, and emptying.

// TestAudit21FixedEmptiedInFlightUnfed: TestDenyCacheEmptiedInFlight
// without its first denial of "y". The fix detects "a call during which
// the cache was emptied" by the sketch's identity (sk != c.sk), but
// empty() swaps a sketch only when fed is set: a cache that has learned
// nothing yet (or nothing since it last emptied) is "emptied" without a
// swap, so the in-flight denial's older reply (debt 5) is learned after
// the admission made while the clock was behind (debt 10) was not.
// docs/distributed.md: "A reply to a call during which the cache was
// emptied is not learned either (it may predate an admission the cache
// did not learn)"; "with one instance a local denial's waits are the
// server's"; Decision.RetryAfter "never early". Here the next local
// denial answers RetryAfter 100 ms and Remaining 5 where the server
// answers 600 ms and 0, and a retry at 100 ms is denied by the server.
// Fix location: denycache.go, empty/observe: mark every empty (an epoch
// counter bumped whether or not a sketch is swapped, taken by begin and
// compared by observe), not only the ones that swapped.
func TestAudit21FixedEmptiedInFlightUnfed(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := newTrapClock(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a21unfed", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	mustAllow := func(key string, n float64, want bool) Decision {
		t.Helper()
		d, err := l.AllowN(ctx, key, n)
		if err != nil || d.Allowed != want {
			t.Fatalf("AllowN(%s, %v) at %d ms = %+v, %v; want Allowed %v", key, n, clk.NowMillis(), d, err, want)
		}
		return d
	}
	mustAllow("k", 5, true) // the cache has learned nothing: fed is false

	clk.arm("(*denyCache).observe")
	var wg sync.WaitGroup
	wg.Add(1)
	var d1 Decision
	var err1 error
	go func() {
		defer wg.Done()
		d1, err1 = l.AllowN(ctx, "k", 6) // denied by the server at debt 5
	}()
	a21Trapped(t, clk.trapped) // the reply is back, not yet learned
	clk.Set(9_500)
	mustAllow("k", 5, true) // behind: the cache "empties" (nothing to swap); the server admits (debt 10)
	clk.Set(10_000)
	close(clk.release)
	wg.Wait()
	if err1 != nil || d1.Allowed {
		t.Fatalf("AllowN(k, 6) at debt 5 = %+v, %v; want denied", d1, err1)
	}
	d := mustAllow("k", 6, false)
	if d.RetryAfter != 600*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("AllowN(k, 6) at debt 10 = %+v (cache denials %d); want the server's RetryAfter 600ms, Remaining 0, ResetAfter 1s",
			d, l.Stats().CacheDenials)
	}
	clk.Advance(d.RetryAfter)
	if d2, err := l.AllowN(ctx, "k", 6); err != nil || !d2.Allowed {
		t.Errorf("AllowN(k, 6) after the RetryAfter %v it was answered = %+v, %v; want admitted (never early)", d.RetryAfter, d2, err)
	}
}

// TestAudit21FixedBeganBehindUnfed: the same hole with the in-flight
// call begun while the clock is already behind (the cache is empty, so
// nothing is swapped by any later empty): a denial computed while behind
// (debt 3 stamped ahead, so the server's ResetAfter shows the hold and
// dated() learns the linear 5) is held back until the clock has caught
// up; meanwhile the same instance's admission of 7 (debt 10) is not
// learned (behind). The older reply is then learned at debt 5: the next
// local denial of 8 answers RetryAfter 300 ms, the server 800 ms.
// The trap holds the denying goroutine before its first clock read in
// observe (it reads the clock after release).
func TestAudit21FixedBeganBehindUnfed(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := &preTrapClock{FakeClock: sketchtest.NewFakeClock(), trapped: make(chan struct{}), release: make(chan struct{})}
	clk.Set(5_000)
	l := e.limiter(t, LimiterConfig{Name: "a21behind", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	mustAllow := func(key string, n float64, want bool) Decision {
		t.Helper()
		d, err := l.AllowN(ctx, key, n)
		if err != nil || d.Allowed != want {
			t.Fatalf("AllowN(%s, %v) at %d ms = %+v, %v; want Allowed %v", key, n, clk.NowMillis(), d, err, want)
		}
		return d
	}
	mustAllow("other", 1, true) // the string exists since 5s
	clk.Set(10_000)
	mustAllow("k", 3, true) // k's cells stamped 10s, debt 3
	clk.Set(9_800)          // behind by 200 ms

	clk.arm("(*denyCache).observe")
	var wg sync.WaitGroup
	wg.Add(1)
	var d1 Decision
	var err1 error
	go func() {
		defer wg.Done()
		d1, err1 = l.AllowN(ctx, "k", 8) // denied: debt 3 held until 10s
	}()
	a21Trapped(t, clk.trapped)
	mustAllow("k", 7, true) // debt 10, not learned (behind)
	clk.Set(10_000)
	close(clk.release)
	wg.Wait()
	if err1 != nil || d1.Allowed || d1.RetryAfter != 300*time.Millisecond {
		t.Fatalf("AllowN(k, 8) at 9.8s, debt 3 = %+v, %v; want denied, RetryAfter 300ms", d1, err1)
	}
	d := mustAllow("k", 8, false)
	if d.RetryAfter != 800*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("AllowN(k, 8) at 10s, debt 10 = %+v (cache denials %d); want the server's RetryAfter 800ms, Remaining 0, ResetAfter 1s",
			d, l.Stats().CacheDenials)
	}
	clk.Advance(d.RetryAfter)
	if d2, err := l.AllowN(ctx, "k", 8); err != nil || !d2.Allowed {
		t.Errorf("AllowN(k, 8) after the RetryAfter %v it was answered = %+v, %v; want admitted (never early)", d.RetryAfter, d2, err)
	}
}

// a21Trapped waits for a trap clock to hold the racing goroutine.
func a21Trapped(t *testing.T, trapped <-chan struct{}) {
	t.Helper()
	select {
	case <-trapped:
	case <-time.After(5 * time.Second):
		t.Fatal("the racing call never read the clock in observe: the forced interleaving is gone (the test needs a new trap)")
	}
}

// preTrapClock is audit19's trapClock, but the trapped goroutine reads
// the clock after it is released (it is descheduled before the read).
type preTrapClock struct {
	*sketchtest.FakeClock
	armed   atomic.Pointer[string]
	trapped chan struct{}
	release chan struct{}
}

func (c *preTrapClock) arm(fn string) { c.armed.Store(&fn) }

func (c *preTrapClock) NowMillis() int64 {
	if fn := c.armed.Load(); fn != nil && onStack(*fn) && c.armed.CompareAndSwap(fn, nil) {
		c.trapped <- struct{}{}
		<-c.release
	}
	return c.FakeClock.NowMillis()
}

// serverAheadClock reads ahead once, for the server call only (its
// reading in scriptArgs), then is back at its own time: a clock that
// stepped forward by ahead just as the server call read it and stepped
// back at once, before anything local read it.
type serverAheadClock struct {
	*sketchtest.FakeClock
	ahead atomic.Int64 // ms; 0: disarmed
}

func (c *serverAheadClock) NowMillis() int64 {
	ms := c.FakeClock.NowMillis()
	if a := c.ahead.Load(); a != 0 && onStack("redis.scriptArgs") && c.ahead.CompareAndSwap(a, 0) {
		return ms + a
	}
	return ms
}

// TestAudit21FixedServerReadAheadOneInstance: one instance, one caller.
// The server call reads the clock at 10.3 s; the clock then steps back
// to 10 s before the reply is learned. The cache's own time never saw
// 10.3 s (only the server call read it), so it is not "behind", and it
// learns the debt the server computed at 10.3 s (7: RetryAfter 200 ms
// for 5) as if computed at 10 s, when the server's debt is 10 (its cells
// are stamped 10 s; a denial writes nothing). Its next local denial of 5
// answers RetryAfter 200 ms and Remaining 3; the server answers 500 ms
// and 0, and a retry at 200 ms is denied. docs/distributed.md: the cache
// "starts draining when the reply arrives, no earlier than the server
// computed the debt", and "every time the clock is behind its time it
// empties itself"; "with one instance a local denial's waits are the
// server's"; Decision.RetryAfter "never early". The audit19 fix (a
// ResetAfter later than the debt's own drain) does not see this: the
// server ran at its own reading, so there is no hold to report.
// Fix location: limiter.go AllowN / localtime.go: the server call's
// reading of LimiterConfig.Clock must raise the local high-water time
// (or be passed to observe), so a reply computed at a later reading
// than the clock's at observe counts as behind.
func TestAudit21FixedServerReadAheadOneInstance(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := &serverAheadClock{FakeClock: sketchtest.NewFakeClock()}
	clk.Set(5_000)
	l := e.limiter(t, LimiterConfig{Name: "a21readahead", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "other", 1); err != nil || !d.Allowed { // the string exists since 5s
		t.Fatalf("AllowN(other, 1) = %+v, %v", d, err)
	}
	clk.Set(10_000)
	if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("AllowN(k, 10) at 10s = %+v, %v", d, err)
	}
	clk.ahead.Store(300)
	d1, err := l.AllowN(ctx, "k", 5) // the server reads 10.3s: debt 7, denied
	if err != nil || d1.Allowed || d1.RetryAfter != 200*time.Millisecond {
		t.Fatalf("AllowN(k, 5) with the server at 10.3s = %+v, %v; want denied, RetryAfter 200ms", d1, err)
	}
	// The clock is back at 10s; nothing else happens.
	d, err := l.AllowN(ctx, "k", 5)
	if err != nil || d.Allowed {
		t.Fatalf("AllowN(k, 5) at 10s = %+v, %v; want denied", d, err)
	}
	if d.RetryAfter != 500*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("AllowN(k, 5) at 10s, server debt 10 = %+v (cache denials %d); want the server's RetryAfter 500ms, Remaining 0, ResetAfter 1s",
			d, l.Stats().CacheDenials)
	}
	clk.Advance(d.RetryAfter)
	if d2, err := l.AllowN(ctx, "k", 5); err != nil || !d2.Allowed {
		t.Errorf("AllowN(k, 5) after the RetryAfter %v it was answered = %+v, %v; want admitted (never early)", d.RetryAfter, d2, err)
	}
}

// TestAudit21DatedNeverBelowServerDrain: dated() on random replies,
// without a server: the learned debt is at least the reply's estimate,
// and (when learnable) drains to 0 no earlier than the server's
// ResetAfter less the rebase slack the server may add to it, and never
// above Burst; a reply whose ResetAfter is the estimate's own drain, or
// later only by that slack, is learned as the estimate itself. Rates include exact-unit and token-counting ones.
func TestAudit21DatedNeverBelowServerDrain(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	for _, rb := range [][2]float64{{10000, 10000}, {3000, 7000}, {math.Pi, 17.5}, {0.7, 13}, {123456.789, 1000.5}, {1e-3, 5}, {1, 9e9}} {
		rate, burst := rb[0], rb[1]
		dc := &denyCache{rate: rate, burst: burst, rebaseAt: func() int64 { return defaultRebaseAt }}
		for range 20000 {
			est := burst * r.Float64()
			if r.IntN(10) == 0 {
				est = math.Floor(est)
			}
			own := int64(resetAfter(est, rate) / time.Millisecond)
			resetMs := own
			switch r.IntN(3) {
			case 1:
				resetMs = own + r.Int64N(1+int64(1000*burst/rate))
			case 2:
				resetMs = own + r.Int64N(3)
			}
			v, ok := dc.dated(est, resetMs)
			if est == 0 {
				// No debt: nothing to learn (a feed of 0 raises nothing).
				if !ok || v != 0 {
					t.Fatalf("dated(0, %d) = %v, %v; want 0, true", resetMs, v, ok)
				}
				continue
			}
			if !ok {
				if float64(resetMs)*rate/1000 <= burst*(1-1e-12) {
					t.Fatalf("rate %v burst %v: dated(%v, %d) not learnable, linear debt %v <= Burst", rate, burst, est, resetMs, float64(resetMs)*rate/1000)
				}
				continue
			}
			if v < est || v > burst {
				t.Fatalf("rate %v burst %v: dated(%v, %d) = %v; want in [est, Burst]", rate, burst, est, resetMs, v)
			}
			// The server's ResetAfter may be later than its debt's drain by
			// its rebase slack (rebaseSlackBound), which is not a lead of
			// its time: within it, the estimate itself is learned.
			slack := rebaseSlackBound(own, defaultRebaseAt)
			if got := resetAfter(v, rate); got < time.Duration(resetMs-slack)*time.Millisecond {
				t.Fatalf("rate %v burst %v: dated(%v, %d) = %v drains in %v, before the server's ResetAfter less its rebase slack %d ms", rate, burst, est, resetMs, v, got, slack)
			}
			if resetMs <= own+slack && v != est {
				t.Fatalf("rate %v burst %v: dated(%v, own %d) = %v; want the estimate", rate, burst, est, resetMs, v)
			}
		}
	}
}

// TestAudit21StripeCountersBalanced: every server call's stripe counter
// is back to 0 once the calls return: admissions, denials, server
// failures (a cancelled context), with and without PreCheck, and a clock
// behind the cache's time.
func TestAudit21StripeCountersBalanced(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, pre := range []bool{false, true} {
		clk := sketchtest.NewFakeClock()
		clk.Set(10_000)
		l := e.limiter(t, LimiterConfig{Name: "a21stripes", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 64, PreCheck: pre})
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 21))
				for i := range 60 {
					ctx := context.Background()
					if i%7 == 0 {
						ctx = cancelled
					}
					if g == 0 && i%10 == 0 {
						clk.Advance(time.Duration(r.Int64N(200)-100) * time.Millisecond)
					}
					_, _ = l.AllowN(ctx, string(rune('a'+r.IntN(5))), float64(r.IntN(6)))
				}
			}()
		}
		wg.Wait()
		for i := range l.cache.pending {
			if n := l.cache.pending[i].Load(); n != 0 {
				t.Errorf("PreCheck=%v: stripe %d has %d calls in flight after every call returned", pre, i, n)
			}
		}
	}
}

// TestAudit21EmptyAllocatesOnlyWhenFed: a clock that stays behind the
// cache's time empties it on every call, but swaps in a new sketch only
// when something was learned since the last swap: calls behind, learning
// nothing, keep one sketch.
func TestAudit21EmptyAllocatesOnlyWhenFed(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a21alloc", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 64})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if d, err := l.AllowN(ctx, "k", 1); err != nil || d.Allowed {
		t.Fatal(d, err)
	}
	first := l.cache.sk.Load()
	clk.Set(9_000)
	if _, err := l.AllowN(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	second := l.cache.sk.Load()
	if second == first {
		t.Fatalf("the cache was fed and the clock is behind: want a fresh sketch")
	}
	for i := range 20 {
		clk.Set(9_000 + int64(i))
		if _, err := l.AllowN(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if l.cache.sk.Load() != second {
		t.Errorf("calls behind that learned nothing swapped the sketch again")
	}
	if l.cache.fed.Load() {
		t.Errorf("fed is set though nothing was learned since the last swap")
	}
}

// TestAudit21FixedHugeFiniteNPanicsLeaksStripe: AllowN's doc: "n must
// be finite and >= 0 (it panics otherwise)", and a request above Burst
// "never fits" (RetryAfter -1). PerSecond(10, 10) counts in units of
// 1/100 token, so a finite n above MaxFloat64/100 is +Inf units: the
// server call's delta check panics ("TryUpdate delta must be finite")
// after the deny cache's begin counted the call in flight, and the
// stripe's counter never comes back to 0 (a recovered panic leaves the
// stripe "busy" for ever: every admission on it is then learned, as with
// PreCheck). Want: a denial with RetryAfter -1 and no call left in
// flight. Fix location: limiter.go AllowN: answer n x unit > Burst (an
// Inf included) as "never" without the server, or clamp nU; and end the
// call in a defer.
func TestAudit21FixedHugeFiniteNPanicsLeaksStripe(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a21hugen", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 64})
	var d Decision
	var err error
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		d, err = l.AllowN(context.Background(), "k", math.MaxFloat64)
	}()
	if panicked != nil {
		t.Errorf("AllowN(k, MaxFloat64) (finite) panicked: %v; want a denial, RetryAfter -1", panicked)
	} else if err != nil || d.Allowed || d.RetryAfter != -1 {
		t.Errorf("AllowN(k, MaxFloat64) = %+v, %v; want denied, RetryAfter -1", d, err)
	}
	for i := range l.cache.pending {
		if n := l.cache.pending[i].Load(); n != 0 {
			t.Errorf("stripe %d has %d calls in flight after AllowN returned", i, n)
		}
	}
}

// TestAudit21QuiescedCacheNeverBelowServer: one instance, concurrent
// callers on a few keys (same stripes, so in-flight races are real), a
// clock that only goes forward, with and without PreCheck, exact and
// token-counting limits. Once every call has returned, a key the cache
// holds (debt > 0) is held at no less than the server's debt at that
// instant: a local denial is never early ("with one instance a local
// denial's waits are the server's, with concurrent callers too",
// docs/distributed.md).
func TestAudit21QuiescedCacheNeverBelowServer(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, lim := range []Limit{PerSecond(10, 10), PerSecond(math.Pi, 17.5)} {
		for _, pre := range []bool{false, true} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l := e.limiter(t, LimiterConfig{Name: "a21q" + string(rune('a'+ci)) + map[bool]string{false: "n", true: "p"}[pre],
				Limit: lim, Clock: clk, DenyCacheCells: 4096, PreCheck: pre})
			keys := []string{"a", "b", "c", "d"}
			held := 0
			for round := range 6 {
				var wg sync.WaitGroup
				for g := range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(uint64(g), uint64(round)))
						for range 40 {
							if g == 0 {
								clk.Advance(time.Duration(r.Int64N(40)) * time.Millisecond)
							}
							if _, err := l.AllowN(ctx, keys[r.IntN(len(keys))], float64(r.IntN(int(lim.Burst)/2+1))); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				for _, k := range keys {
					q := l.cache.sk.Load().QueryString(k)
					srv, err := l.Sketch().Query(ctx, k)
					if err != nil {
						t.Fatal(err)
					}
					if q > 0 {
						held++
					}
					if q > 0 && q < srv {
						t.Errorf("%v PreCheck=%v round %d at %d ms: the cache holds %s at %v units, the server's debt is %v: a local denial's waits are early",
							lim, pre, round, clk.NowMillis(), k, q, srv)
					}
				}
			}
			t.Logf("%v PreCheck=%v: %d held keys checked, %d cache denials, %d server calls", lim, pre, held, l.Stats().CacheDenials, l.Stats().ServerCalls)
		}
	}
}
