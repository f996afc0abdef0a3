package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit19 (independent review of e95cc53 and 514c55e): the deny cache.

// TestAudit19FixedDenyCacheServerAheadOtherInstance: the deny cache
// judges "behind" by its own high-water mark, which only its own reads
// of LimiterConfig.Clock raise. The server runs a call at tm = max(clock,
// the string's hw) and drains a cell only from its stamp: both may lie
// ahead of an instance's local high-water mark when another instance
// (same clock, as a deterministic test of N instances has it) wrote at
// a later reading. The server then answers a RetryAfter lag-corrected
// (1100 ms here), but the cache is not "behind", learns the debt dated at
// the clock's earlier reading, drains it 1 s early, and the next local
// denial answers RetryAfter 100 ms. docs/distributed.md: "This
// instance's own admissions update a key the cache holds, so with one
// instance a local denial's waits are the server's"; Decision.RetryAfter
// "never early"; here nothing at all is admitted after the debt the
// cache learned, yet retrying at its RetryAfter is denied.
func TestAudit19FixedDenyCacheServerAheadOtherInstance(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000) // both instances start at 5s
	cfg := LimiterConfig{Name: "a19ahead", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024}
	a := e.limiter(t, cfg)
	b := e.limiter(t, cfg) // another instance, same shared (fake) clock
	ctx := context.Background()
	clk.Set(10_000)
	if d, err := a.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("A.AllowN(10) at 10s = %+v, %v", d, err)
	}
	clk.Set(9_000) // the clock steps back 1 s; B never read 10s
	d, err := b.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 1100*time.Millisecond {
		t.Fatalf("B.AllowN(1) at 9s = %+v, %v; want denied by the server, RetryAfter 1.1s", d, err)
	}
	d2, err := b.AllowN(ctx, "k", 1) // the same request at once
	if err != nil || d2.Allowed {
		t.Fatalf("B.AllowN(1) again at 9s = %+v, %v; want denied", d2, err)
	}
	if d2.RetryAfter != d.RetryAfter || d2.ResetAfter != d.ResetAfter {
		t.Errorf("B.AllowN(1) again at 9s, nothing admitted since = %+v; the server answered RetryAfter %v, ResetAfter %v a moment before (deny cache answered %d times)",
			d2, d.RetryAfter, d.ResetAfter, b.Stats().CacheDenials)
	}
	// Honour the second answer: it must not be early.
	clk.Advance(d2.RetryAfter)
	if d3, err := b.AllowN(ctx, "k", 1); err != nil || !d3.Allowed {
		t.Errorf("B.AllowN(1) after the RetryAfter %v it was answered = %+v, %v; want admitted (RetryAfter never early)", d2.RetryAfter, d3, err)
	}
}

// TestAudit19FixedDenyCacheStampAheadOtherInstance: the same without
// a header ahead: the string exists since 5s, A writes k at 10s, the
// clock steps back to 9s. The server runs at tm = 9s (no lag) but drains
// k's cells only from their stamp (10s): RetryAfter 1.1s. B's cache is
// not behind (its high-water mark is 5s), learns the debt at 9s and
// answers 100 ms.
func TestAudit19FixedDenyCacheStampAheadOtherInstance(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000)
	cfg := LimiterConfig{Name: "a19stamp", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024}
	a := e.limiter(t, cfg)
	b := e.limiter(t, cfg)
	ctx := context.Background()
	if d, err := a.AllowN(ctx, "other", 1); err != nil || !d.Allowed { // creates the string at 5s
		t.Fatalf("A.AllowN(other, 1) at 5s = %+v, %v", d, err)
	}
	clk.Set(10_000)
	if d, err := a.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("A.AllowN(10) at 10s = %+v, %v", d, err)
	}
	clk.Set(9_000)
	d, err := b.AllowN(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 1100*time.Millisecond {
		t.Fatalf("B.AllowN(1) at 9s = %+v, %v; want denied by the server, RetryAfter 1.1s", d, err)
	}
	d2, err := b.AllowN(ctx, "k", 1)
	if err != nil || d2.Allowed || d2.RetryAfter != d.RetryAfter || d2.ResetAfter != d.ResetAfter {
		t.Errorf("B.AllowN(1) again at 9s, nothing admitted since = %+v, %v; want the server's RetryAfter %v, ResetAfter %v",
			d2, err, d.RetryAfter, d.ResetAfter)
	}
	clk.Advance(d2.RetryAfter)
	if d3, err := b.AllowN(ctx, "k", 1); err != nil || !d3.Allowed {
		t.Errorf("B.AllowN(1) after the RetryAfter %v it was answered = %+v, %v; want admitted", d2.RetryAfter, d3, err)
	}
}

// trapClock is a fake clock whose reading, made from inside a function
// named by the armed trap, is taken and then held until the test releases
// it: a goroutine descheduled right after reading the clock, made
// deterministic.
type trapClock struct {
	*sketchtest.FakeClock
	armed   atomic.Pointer[string] // a function name the stack must hold
	trapped chan struct{}
	release chan struct{}
}

func newTrapClock(ms int64) *trapClock {
	c := &trapClock{FakeClock: sketchtest.NewFakeClock(), trapped: make(chan struct{}), release: make(chan struct{})}
	c.Set(ms)
	return c
}

func (c *trapClock) arm(fn string) { c.armed.Store(&fn) }

func (c *trapClock) NowMillis() int64 {
	ms := c.FakeClock.NowMillis()
	if fn := c.armed.Load(); fn != nil && onStack(*fn) && c.armed.CompareAndSwap(fn, nil) {
		c.trapped <- struct{}{}
		<-c.release
	}
	return ms
}

func onStack(fn string) bool {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestAudit19FixedDenyCacheRacingAdmission: one instance, a clock that
// never steps back. A denial (debt 5, asking 6) is in flight: the server
// answered, the caller has not yet fed the cache. Meanwhile another
// goroutine's admission of 5 takes the key to debt 10; its refresh finds
// the key not held (the denial's feed has not landed), so adds nothing.
// The denial's feed then records debt 5. From then on, with nothing
// admitted, the cache answers the key locally with Remaining 5 (the debt
// is 10: Remaining 0) and RetryAfter 100 ms (the server: 600 ms), early.
// docs/distributed.md: "This instance's own admissions update a key the
// cache holds, so with one instance a local denial's waits are the
// server's"; Decision.RetryAfter "never early"; Remaining "Burst minus
// the key's debt after the decision". The interleaving is forced with a
// clock read that holds the denying goroutine inside observe (its behind
// check); the system clock reads nothing there, but the window (between
// the reply and the feed) is the same.
func TestAudit19FixedDenyCacheRacingAdmission(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := newTrapClock(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a19race", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 5); err != nil || !d.Allowed {
		t.Fatalf("AllowN(5) = %+v, %v", d, err)
	}
	clk.arm("(*denyCache).observe")
	var wg sync.WaitGroup
	wg.Add(1)
	var d1 Decision
	var err1 error
	go func() {
		defer wg.Done()
		d1, err1 = l.AllowN(ctx, "k", 6) // denied by the server at debt 5
	}()
	<-clk.trapped // the server answered; the cache is not fed yet
	if d, err := l.AllowN(ctx, "k", 5); err != nil || !d.Allowed {
		t.Fatalf("racing AllowN(5) = %+v, %v; want admitted (debt 5 + 5 <= 10)", d, err)
	}
	close(clk.release)
	wg.Wait()
	if err1 != nil || d1.Allowed || d1.RetryAfter != 100*time.Millisecond {
		t.Fatalf("AllowN(6) at debt 5 = %+v, %v; want denied, RetryAfter 100ms", d1, err1)
	}
	// Both calls returned; nothing else is admitted from here on.
	d, err := l.AllowN(ctx, "k", 6)
	if err != nil || d.Allowed {
		t.Fatalf("AllowN(6) at debt 10 = %+v, %v; want denied", d, err)
	}
	if d.RetryAfter != 600*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("AllowN(6) at debt 10 (one instance, both earlier calls returned) = %+v (cache denials %d); want RetryAfter 600ms, Remaining 0, ResetAfter 1s (the server's)",
			d, l.Stats().CacheDenials)
	}
	clk.Advance(d.RetryAfter)
	if d2, err := l.AllowN(ctx, "k", 6); err != nil || !d2.Allowed {
		t.Errorf("AllowN(6) after the RetryAfter %v it was answered = %+v, %v; want admitted (never early)", d.RetryAfter, d2, err)
	}
}

// TestAudit19DenyCacheWaitsAreServers: one instance, a clock that only
// goes forward, nothing racing: a local denial's RetryAfter and
// ResetAfter are the server's ("with one instance a local denial's waits
// are the server's", docs/distributed.md), checked against the server's
// own answer asked through a second, cache-less limiter on the same
// sketch at the same instant, for exact and token-counting
// configurations (never early; exactly the server's for the exact ones).
func TestAudit19DenyCacheWaitsAreServers(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, lim := range []Limit{
		PerSecond(10, 10), PerSecond(3, 7), PerSecond(0.7, 13), PerSecond(1000.0/7, 100),
		PerSecond(math.Pi, 17.5), PerSecond(1, 9e9), PerSecond(123456.789, 1000.5), PerSecond(1e-3, 5),
	} {
		t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			name := fmt.Sprintf("a19dw%d", ci)
			l := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, DenyCacheCells: 4096})
			srv := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk})
			r := rand.New(rand.NewPCG(uint64(ci), 77))
			tokMs := 1000 / lim.Rate
			local := 0
			// Token-counting configurations are late by the float32
			// roundings (doc.go), the cache's own included: not early.
			_, _, exact, _ := units.Units(lim.Rate, lim.Burst)
			rounds := 40
			if lim.Burst > 1e6 {
				rounds = 10 // the server's search costs ms per call here
			}
			for round := range rounds {
				k := fmt.Sprintf("k%d", round)
				n := min(lim.Burst, float64(1+r.IntN(3)))
				if r.IntN(3) == 0 {
					n = lim.Burst * r.Float64()
				}
				// Take the burst in a few admissions.
				for taken := 0.0; taken < lim.Burst; {
					m := min(lim.Burst-taken, max(lim.Burst*r.Float64(), 1))
					if d, err := l.AllowN(ctx, k, m); err != nil || !d.Allowed {
						break
					}
					taken += m
					clk.Advance(time.Duration(r.Float64()*min(tokMs, 1e9)) * time.Millisecond)
				}
				d, err := l.AllowN(ctx, k, n)
				if err != nil || d.Allowed || d.RetryAfter <= 0 {
					continue
				}
				clk.Advance(time.Duration(float64(d.RetryAfter.Milliseconds())*r.Float64()*0.99) * time.Millisecond)
				before := l.Stats().CacheDenials
				got, err := l.AllowN(ctx, k, n)
				if err != nil {
					t.Fatal(err)
				}
				if l.Stats().CacheDenials == before {
					continue // the server answered
				}
				local++
				want, err := srv.AllowN(ctx, k, n)
				if err != nil || want.Allowed {
					t.Fatalf("round %d: the cache denied AllowN(%s, %v) locally (%+v); the server: %+v, %v", round, k, n, got, want, err)
				}
				if got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter {
					t.Errorf("round %d: local denial of AllowN(%s, %v) = %+v; the server's RetryAfter %v, ResetAfter %v: early", round, k, n, got, want.RetryAfter, want.ResetAfter)
				} else if exact && (got.RetryAfter != want.RetryAfter || got.ResetAfter != want.ResetAfter) {
					t.Errorf("round %d: local denial of AllowN(%s, %v) = %+v; the server's RetryAfter %v, ResetAfter %v: late", round, k, n, got, want.RetryAfter, want.ResetAfter)
				}
			}
			t.Logf("%d local denials checked", local)
		})
	}
}

// TestAudit19DenyCacheConcurrentSteppingClock: callers race on a few
// keys with the deny cache and PreCheck while another goroutine steps
// the clock forward and back: race-clean, no error, every answer well
// formed (Remaining in [0, Burst], RetryAfter -1 or > 0 on a denial, -1
// on an admission, ResetAfter >= 0), and no key admitted more than Burst
// plus what the latest clock reading can have drained (the cache never
// admits; the server never decays more than the clock's high-water time).
func TestAudit19DenyCacheConcurrentSteppingClock(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, pre := range []bool{false, true} {
		t.Run(fmt.Sprintf("PreCheck=%v", pre), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			const start = 100_000
			clk.Set(start)
			lim := PerSecond(10, 10)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a19cc%v", pre), Limit: lim, Clock: clk, DenyCacheCells: 64, PreCheck: pre})
			ctx := context.Background()
			var maxClock atomic.Int64
			maxClock.Store(start)
			stop := make(chan struct{})
			var clockWG sync.WaitGroup
			clockWG.Add(1)
			go func() {
				defer clockWG.Done()
				r := rand.New(rand.NewPCG(5, 5))
				now := int64(start)
				for {
					select {
					case <-stop:
						return
					default:
					}
					now += r.Int64N(61) - 30 // back and forth, 30 ms either way
					now = max(now, start)
					clk.Set(now)
					if now > maxClock.Load() {
						maxClock.Store(now)
					}
					runtime.Gosched()
				}
			}()
			keys := []string{"a", "b", "c"}
			var admitted [3]atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan string, 64)
			for g := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 6))
					for range 150 {
						ki := r.IntN(len(keys))
						n := float64(r.IntN(4))
						d, err := l.AllowN(ctx, keys[ki], n)
						bad := err != nil || d.Remaining < 0 || d.Remaining > lim.Burst || d.ResetAfter < 0 ||
							(d.Allowed && d.RetryAfter != -1) || (!d.Allowed && d.RetryAfter != -1 && d.RetryAfter <= 0)
						if bad {
							select {
							case errs <- fmt.Sprintf("AllowN(%s, %v) = %+v, %v", keys[ki], n, d, err):
							default:
							}
						}
						if d.Allowed {
							admitted[ki].Add(int64(n))
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			clockWG.Wait()
			close(errs)
			for m := range errs {
				t.Error(m)
			}
			bound := lim.Burst + lim.Rate*float64(maxClock.Load()-start)/1000
			for i, k := range keys {
				if got := float64(admitted[i].Load()); got > bound {
					t.Errorf("key %s: %v tokens admitted; at most Burst + Rate x (latest clock - start) = %v", k, got, bound)
				}
			}
			t.Logf("clock reached +%d ms; admitted %v %v %v; cache denials %d, server calls %d", maxClock.Load()-start,
				admitted[0].Load(), admitted[1].Load(), admitted[2].Load(), l.Stats().CacheDenials, l.Stats().ServerCalls)
		})
	}
}

// TestAudit19DenyCacheSequentialSteps: one instance, one caller, the
// clock stepping forward and back (ms to an hour): every local denial is
// one the server makes at that instant, with the server's waits (exact
// configurations), with and without PreCheck.
func TestAudit19DenyCacheSequentialSteps(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, lim := range []Limit{PerSecond(10, 10), PerSecond(3, 7), PerSecond(0.7, 13)} {
		for _, pre := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/%v/PreCheck=%v", lim.Rate, lim.Burst, pre), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				name := fmt.Sprintf("a19ds%d%v", ci, pre)
				l := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, DenyCacheCells: 4096, PreCheck: pre})
				srv := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk})
				r := rand.New(rand.NewPCG(uint64(ci), 99))
				tokMs := int64(1000 / lim.Rate)
				local := 0
				for step := range 400 {
					switch x := r.IntN(10); {
					case x < 4:
						clk.Advance(time.Duration(r.Int64N(2*tokMs)) * time.Millisecond)
					case x < 6:
						clk.Advance(-time.Duration(r.Int64N(3*tokMs)) * time.Millisecond)
					case x < 7:
						clk.Advance(time.Duration(r.Int64N(3_600_000)) * time.Millisecond)
					}
					k := fmt.Sprintf("k%d", r.IntN(3))
					n := float64(r.IntN(int(lim.Burst) + 1))
					before := l.Stats().CacheDenials
					got, err := l.AllowN(ctx, k, n)
					if err != nil {
						t.Fatal(err)
					}
					if l.Stats().CacheDenials == before {
						continue
					}
					local++
					want, err := srv.AllowN(ctx, k, n) // denied: writes nothing
					if err != nil || want.Allowed || got.RetryAfter != want.RetryAfter || got.ResetAfter != want.ResetAfter || !a19Close(got.Remaining, want.Remaining) {
						t.Fatalf("step %d at %d: local denial of AllowN(%s, %v) = %+v; the server: %+v, %v", step, clk.NowMillis(), k, n, got, want, err)
					}
				}
				t.Logf("%d local denials checked", local)
			})
		}
	}
}

// TestAudit19FixedDenyCacheSecondStepBackSameHighWater: one instance,
// one caller. The cache empties itself "once per high-water time"
// (denycache.go, behind): after a first step back emptied it at high-water
// time H, the clock returns to exactly H (not past it: H stays the
// high-water mark) and the cache, no longer behind, learns a denial
// (debt 5). The clock steps back again: behind again, but cleared == H,
// so the cache is not emptied; it learns nothing while behind, so it
// misses this instance's own admission of 5 (the server's debt is now
// 10). When the clock reaches H again the cache answers debt 5:
// Remaining 5 and RetryAfter 100 ms for a request the server makes wait
// 600 ms (docs/distributed.md: "with one instance a local denial's waits
// are the server's", and "while the clock is behind its time it empties
// itself once, answers nothing and learns nothing"; Decision.RetryAfter
// "never early").
func TestAudit19FixedDenyCacheSecondStepBackSameHighWater(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	l := e.limiter(t, LimiterConfig{Name: "a19hw2", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	must := func(n float64, key string, allowed bool) Decision {
		t.Helper()
		d, err := l.AllowN(ctx, key, n)
		if err != nil || d.Allowed != allowed {
			t.Fatalf("AllowN(%s, %v) at %d = %+v, %v; want allowed %v", key, n, clk.NowMillis(), d, err, allowed)
		}
		return d
	}
	must(1, "x", true) // creates the string at 10s
	clk.Set(9_000)     // first step back: the cache empties itself (high-water 10s)
	must(0, "x", true)
	clk.Set(10_000) // back to exactly the high-water time: not behind
	must(5, "k", true)
	must(6, "k", false) // the server denies at debt 5; the cache learns 5
	clk.Set(9_500)      // second step back, same high-water time
	must(5, "k", true)  // the server: debt 10 (no elapsed time behind the stamp)
	clk.Set(10_000)
	d := must(6, "k", false)
	if d.RetryAfter != 600*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("AllowN(k, 6) at 10s, debt 10 = %+v (cache denials %d); want RetryAfter 600ms, Remaining 0, ResetAfter 1s (the server's)",
			d, l.Stats().CacheDenials)
	}
	clk.Advance(d.RetryAfter)
	if d2, err := l.AllowN(ctx, "k", 6); err != nil || !d2.Allowed {
		t.Errorf("AllowN(k, 6) after the RetryAfter %v it was answered = %+v, %v; want admitted (never early)", d.RetryAfter, d2, err)
	}
}
