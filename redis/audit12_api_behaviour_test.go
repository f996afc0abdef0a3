package redis

// Behavioural checks of the redis module's contract (issues 17, 27, 28,
// docs/distributed.md, the package doc) against a real redis-server.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// Issue 17: "many goroutines on several clients (standing in for
// instances) racing TryUpdate admit exactly the limit globally". Here
// through the Limiter: 3 instances (one plain, one with the deny cache,
// one with the cache and the pre-check) x 8 goroutines race a burst of 37
// on a frozen clock (no refill): exactly 37 admitted, and once it is
// spent every instance denies.
func TestAudit12ExactAcrossInstances(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		const burst = 37
		cfgs := []LimiterConfig{
			{Name: "a12x", Limit: PerSecond(5, burst), Clock: clk},
			{Name: "a12x", Limit: PerSecond(5, burst), Clock: clk, DenyCacheCells: 512},
			{Name: "a12x", Limit: PerSecond(5, burst), Clock: clk, DenyCacheCells: 512, PreCheck: true},
		}
		var ls []*Limiter
		for _, c := range cfgs {
			ls = append(ls, e.limiter(t, c))
		}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, 64)
		for _, l := range ls {
			for range 8 {
				wg.Add(1)
				go func(l *Limiter) {
					defer wg.Done()
					for range 10 {
						d, err := l.Allow(context.Background(), "hot")
						if err != nil {
							errc <- err
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}(l)
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		if got := admitted.Load(); got != burst {
			t.Fatalf("admitted %d across 3 instances x 8 goroutines; want exactly %d", got, burst)
		}
		for i, l := range ls {
			d, err := l.Allow(context.Background(), "hot")
			if err != nil || d.Allowed {
				t.Fatalf("instance %d after the burst: %+v, %v; want a denial", i, d, err)
			}
		}
	})
}

// ratBucket is a rational token bucket in debt form: the oracle.
type ratBucket struct {
	rate, burst *big.Rat // tokens per ms, tokens
	debt        *big.Rat
	at          int64 // ms
}

func (b *ratBucket) drain(now int64) {
	if now > b.at {
		d := new(big.Rat).Mul(b.rate, new(big.Rat).SetInt64(now-b.at))
		b.debt.Sub(b.debt, d)
		if b.debt.Sign() < 0 {
			b.debt.SetInt64(0)
		}
		b.at = now
	}
}

// ceilMs is ceil(x) for a rational number of ms.
func ceilMs(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom())
	if new(big.Rat).SetInt(q).Cmp(x) < 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func ratF(x *big.Rat) float64 { f, _ := x.Float64(); return f }

// Decision values against the rational token bucket (package doc:
// Remaining "is Burst minus the key's debt after the decision"; RetryAfter
// "-1 when the request was allowed ... When denied: the exact wait,
// rounded up to the ms, after which the same request fits if nothing else
// is admitted meanwhile (never early); -1 also when n > Burst";
// ResetAfter "the time until the key's debt drains to 0"). A fake clock
// drives the server function. After a denial with a finite RetryAfter the
// test also probes the wait itself: 1 ms before it the request is still
// denied, at it admitted (issue 17: "AllowN with an exact RetryAfter").
// Decisions within the float32 bound of the limit are not compared.
func TestAudit12DecisionOracle(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, lim := range []Limit{PerSecond(3, 7), PerSecond(0.7, 2.5), PerSecond(1000, 10)} {
			for _, cache := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/cache=%v", lim.Rate, lim.Burst, cache), func(t *testing.T) {
					audit12Oracle(t, e, lim, cache)
				})
			}
		}
	})
}

// The same on the 3-master cluster (API.md: "Global limits run on Redis
// standalone and on Redis Cluster ... with the same exactness"), sharded.
func TestAudit12DecisionOracleCluster(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			audit12Oracle(t, newEnv(t, lib, "cluster"), PerSecond(3, 7), true)
		})
	}
}

func audit12Oracle(t *testing.T, e *env, lim Limit, cache bool) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	cfg := LimiterConfig{Name: e.ns(fmt.Sprintf("a12o:%v:%v:%v", lim.Rate, lim.Burst, cache)), Limit: lim, Clock: clk}
	if cache {
		cfg.DenyCacheCells, cfg.PreCheck, cfg.Shards = 256, true, 3
	}
	l := e.limiter(t, cfg)
	// The rate the limiter counts at: the short fraction within 4 ulps of
	// the float64 (7/10 for 0.7), as package limit takes it.
	rate := new(big.Rat).SetFloat64(lim.Rate)
	if p, q, ok := units.Fraction(lim.Rate); ok {
		rate.SetFrac(p, q)
	}
	rate.Quo(rate, big.NewRat(1000, 1))
	b := &ratBucket{rate: rate, burst: new(big.Rat).SetFloat64(lim.Burst), debt: new(big.Rat), at: clk.NowMillis()}
	rng := rand.New(rand.NewPCG(12, uint64(lim.Rate*1000)))
	ctx := context.Background()
	ns := []float64{0, 0.5, 1, 1, 1, 2, 3, lim.Burst, lim.Burst + 1}
	tol := lim.Burst * 2e-6 // float32 rounding of the stored debt, up
	_, _, exact, _ := units.Units(lim.Rate, lim.Burst)
	if exact {
		tol = 0 // the limiter counts in exact units: the rational bucket's answers
	}
	probes, late := 0, 0
	for i := range 400 {
		if rng.IntN(3) == 0 {
			clk.Advance(time.Duration(rng.IntN(int(1000*lim.Burst/lim.Rate/4)+2)) * time.Millisecond)
		}
		n := ns[rng.IntN(len(ns))]
		now := clk.NowMillis()
		b.drain(now)
		after := new(big.Rat).Add(b.debt, new(big.Rat).SetFloat64(n))
		slack := math.Abs(ratF(after) - lim.Burst)
		want := after.Cmp(b.burst) <= 0
		d, err := l.AllowN(ctx, "k", n)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if slack < tol {
			// Too close to call: follow the server.
			if d.Allowed {
				b.debt = after
			}
			continue
		}
		if d.Allowed != want {
			t.Fatalf("step %d n=%v debt=%v: Allowed=%v; oracle %v", i, n, ratF(b.debt), d.Allowed, want)
		}
		if d.Limit != lim {
			t.Fatalf("step %d: Limit %+v; want %+v", i, d.Limit, lim)
		}
		if want {
			b.debt = after
		}
		remWant := ratF(new(big.Rat).Sub(b.burst, b.debt))
		if d.Remaining > remWant+1e-9 || d.Remaining < remWant-tol-1e-12*lim.Burst || d.Remaining < 0 {
			t.Fatalf("step %d n=%v: Remaining %v; oracle %v", i, n, d.Remaining, remWant)
		}
		resetWant := ceilMs(new(big.Rat).Quo(b.debt, b.rate))
		if got := d.ResetAfter.Milliseconds(); got < resetWant || got > resetWant+1 || exact && got != resetWant || d.ResetAfter%time.Millisecond != 0 {
			t.Fatalf("step %d n=%v debt=%v: ResetAfter %v; oracle %d ms", i, n, ratF(b.debt), d.ResetAfter, resetWant)
		}
		switch {
		case d.Allowed:
			if d.RetryAfter != -1 {
				t.Fatalf("step %d: allowed with RetryAfter %v; want -1", i, d.RetryAfter)
			}
		case n > lim.Burst:
			if d.RetryAfter != -1 {
				t.Fatalf("step %d: n=%v > Burst with RetryAfter %v; want -1", i, n, d.RetryAfter)
			}
		default:
			need := new(big.Rat).Sub(after, b.burst)
			rw := ceilMs(new(big.Rat).Quo(need, b.rate))
			got := d.RetryAfter.Milliseconds()
			if got < rw || got > rw+1 || exact && got != rw || d.RetryAfter%time.Millisecond != 0 {
				t.Fatalf("step %d n=%v debt=%v: RetryAfter %v; oracle %d ms", i, n, ratF(b.debt), d.RetryAfter, rw)
			}
			if got != rw {
				late++
			}
			if rng.IntN(2) == 0 && got > 1 {
				probes++
				clk.Advance(d.RetryAfter - time.Millisecond)
				d2, err := l.AllowN(ctx, "k", n)
				if err != nil || d2.Allowed {
					t.Fatalf("step %d: retry 1 ms before RetryAfter %v admitted (%+v, %v)", i, d.RetryAfter, d2, err)
				}
				clk.Advance(time.Millisecond)
				d3, err := l.AllowN(ctx, "k", n)
				if err != nil || !d3.Allowed {
					t.Fatalf("step %d: retry at RetryAfter %v denied (%+v, %v)", i, d.RetryAfter, d3, err)
				}
				b.drain(clk.NowMillis())
				b.debt.Add(b.debt, new(big.Rat).SetFloat64(n))
			}
		}
	}
	if probes == 0 {
		t.Fatal("no RetryAfter probe ran")
	}
	t.Logf("%d RetryAfter probes; %d RetryAfters 1 ms above the rational oracle", probes, late)
}

// n > Burst and n = 0 (package doc: RetryAfter "-1 also when n > Burst (it
// never fits)"; AllowN: "n must be finite and >= 0"; DecideContext is
// httplimit's shape, whose Never is "set when n > burst"). A request that
// never fits takes nothing; n = 0 is admitted and takes nothing.
func TestAudit12OverBurstAndZero(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a12n", Limit: PerSecond(2, 10), Clock: clk})
		ctx := context.Background()
		if d, err := l.AllowN(ctx, "k", 4); err != nil || !d.Allowed || d.Remaining != 6 {
			t.Fatalf("AllowN 4: %+v, %v", d, err)
		}
		d, err := l.AllowN(ctx, "k", 10.5)
		if err != nil || d.Allowed || d.RetryAfter != -1 || d.Remaining != 6 {
			t.Fatalf("AllowN 10.5 > Burst: %+v, %v; want denied, RetryAfter -1, Remaining 6", d, err)
		}
		d, err = l.AllowN(ctx, "k", 0)
		if err != nil || !d.Allowed || d.RetryAfter != -1 || d.Remaining != 6 || d.ResetAfter != 2*time.Second {
			t.Fatalf("AllowN 0: %+v, %v; want allowed, Remaining 6, ResetAfter 2s", d, err)
		}
		ld, err := l.DecideContext(ctx, "k", 11)
		if err != nil || ld.Allowed || !ld.Never || ld.RetryAfter != limit.InfDuration {
			t.Fatalf("DecideContext 11 > Burst: %+v, %v; want Never, RetryAfter InfDuration", ld, err)
		}
		ld, err = l.DecideContext(ctx, "k", 6)
		if err != nil || !ld.Allowed || ld.Remaining != 0 || ld.Burst != 10 || ld.Policy != "a12n" {
			t.Fatalf("DecideContext 6: %+v, %v", ld, err)
		}
		ld, err = l.DecideContext(ctx, "k", 1)
		if err != nil || ld.Allowed || ld.Never || ld.RetryAfter != 500*time.Millisecond {
			t.Fatalf("DecideContext 1 on a full debt: %+v, %v; want denied, RetryAfter 500ms", ld, err)
		}
		// A bucket exactly Burst wide: n == Burst on a fresh key fits.
		if d, err := l.AllowN(ctx, "fresh", 10); err != nil || !d.Allowed || d.Remaining != 0 || d.ResetAfter != 5*time.Second {
			t.Fatalf("AllowN Burst on a fresh key: %+v, %v", d, err)
		}
	})
}

// Failure policies with the server killed (issue 17: "an explicit
// fail-open / fail-closed / local-fallback policy (fallback: a local
// limiter at rate/N); a degraded signal and counters; reconnect after the
// server restarts"; package doc: "When the server fails or times out, the
// Policy decides, and AllowN returns that decision with an error matching
// ErrDegraded that also wraps the cause").
func TestAudit12PoliciesServerDown(t *testing.T) {
	for _, p := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(p.String(), func(t *testing.T) {
			forEachClient(t, func(t *testing.T, e *env) {
				l := e.limiter(t, LimiterConfig{Name: "a12p", Limit: PerSecond(0.01, 10), Policy: p, Instances: 2, Timeout: 300 * time.Millisecond})
				ctx := context.Background()
				if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed || l.Degraded() {
					t.Fatalf("healthy: %+v, %v, degraded %v", d, err, l.Degraded())
				}
				e.srv.kill()
				var admitted int
				for i := range 8 {
					d, err := l.Allow(ctx, "k")
					if !errors.Is(err, ErrDegraded) || !audit12WrapsCause(err) {
						t.Fatalf("call %d: err = %v; want ErrDegraded wrapping the cause", i, err)
					}
					if d.Allowed {
						admitted++
						if d.RetryAfter != -1 {
							t.Fatalf("call %d: admitted with RetryAfter %v", i, d.RetryAfter)
						}
					}
					switch p {
					case FailClosed:
						if d.Allowed || d.RetryAfter != -1 {
							t.Fatalf("FailClosed: %+v; want denied with RetryAfter -1", d)
						}
					case LocalFallback:
						if !d.Allowed && d.RetryAfter <= 0 {
							t.Fatalf("LocalFallback denial %+v: want a finite RetryAfter > 0", d)
						}
					}
				}
				want := map[Policy]int{FailClosed: 0, FailOpen: 8, LocalFallback: 5}[p]
				if admitted != want {
					t.Fatalf("%v admitted %d of 8 with the server down; want %d", p, admitted, want)
				}
				if !l.Degraded() {
					t.Fatal("Degraded() false with the server down")
				}
				st := l.Stats()
				if st.Decisions != 9 || st.ServerCalls != 9 || st.ServerErrors != 8 || st.DegradedPeriod != 1 ||
					st.PolicyAdmits != int64(want) || st.PolicyDenials != int64(8-want) {
					t.Fatalf("Stats %+v", st)
				}
				e.srv.start()
				waitFor(t, 10*time.Second, "recovery", func() bool {
					_, err := l.Allow(ctx, "other")
					return err == nil
				})
				if l.Degraded() {
					t.Fatal("Degraded() still true after a successful round trip")
				}
			})
		})
	}
}

// TestAudit12FallbackNotNever: under LocalFallback (Burst 10, N 4: the
// fallback's Burst is 2.5) with the server down, a request of 6 fits the
// limit's Burst once the server is back, so it is not "never": the
// fallback gives no decision for it, as FailClosed does (AllowN: denied,
// RetryAfter -1, the limiter's own Limit, ErrDegraded; DecideContext:
// not Never, RetryAfter 0; httplimit: its error handler, 503). A request
// above Burst is Never; one within Burst/N is the fallback's to decide.
func TestAudit12FallbackNotNever(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		l := e.limiter(t, LimiterConfig{Name: "a12f", Limit: PerSecond(1, 10), Policy: LocalFallback, Instances: 4, Timeout: 300 * time.Millisecond})
		if pol := l.Policies(); len(pol) != 1 || pol[0].Burst != 10 {
			t.Fatalf("Policies %+v", pol)
		}
		e.srv.kill()
		ctx := context.Background()
		ld, err := l.DecideContext(ctx, "k", 6)
		if !errors.Is(err, ErrDegraded) {
			t.Fatalf("err = %v", err)
		}
		if ld.Allowed || ld.Never || ld.RetryAfter != 0 {
			t.Errorf("DecideContext(n=6), Burst 10, fallback Burst 2.5, server down: Allowed %v Never %v RetryAfter %v; want a denial with no retry time, not Never",
				ld.Allowed, ld.Never, ld.RetryAfter)
		}
		d, err := l.AllowN(ctx, "k", 6)
		if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 || d.Limit != l.Limit() {
			t.Errorf("AllowN(n=6) under LocalFallback, server down: %+v, %v; want denied, RetryAfter -1, the limiter's Limit %+v, ErrDegraded", d, err, l.Limit())
		}
		if ld, _ := l.DecideContext(ctx, "k", 11); !ld.Never {
			t.Errorf("DecideContext(n=11 > Burst 10), server down: Never false; want Never")
		}
		if d, _ := l.AllowN(ctx, "k", 2); !d.Allowed || d.Limit != (Limit{Rate: 0.25, Burst: 2.5}) {
			t.Errorf("AllowN(n=2 <= Burst/N), server down: %+v; want the fallback's admission", d)
		}
		// What a client of httplimit.Wrap sees: a request of cost 6.
		h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
			httplimit.WithCost(func(*http.Request) int { return 6 }),
			httplimit.WithKey(httplimit.Func(func(*http.Request) string { return "k" })))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("httplimit over LocalFallback, cost 6 <= Burst 10, server down: %d, body %q; want 503 (no decision)",
				rec.Code, strings.TrimSpace(rec.Body.String()))
		}
	})
}

// Start-up check (issue 27: "At start-up the Limiter checks ... refuses or
// warns (an option)"; package doc: CheckRefuse "is the network error of an
// unreachable server", CheckSkip "does not contact the server").
func TestAudit12StartupUnreachable(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		c := e.conn(t)
		e.srv.kill()
		cfg := LimiterConfig{Name: "a12s", Limit: PerSecond(1, 1), CheckTimeout: 500 * time.Millisecond}
		newL := func(cfg LimiterConfig) (*Limiter, error) {
			switch c := c.(type) {
			case rueidisConn:
				return NewLimiter(c.c, cfg)
			case goredisConn:
				return NewLimiterGoRedis(c.c, cfg)
			}
			panic("unreachable")
		}
		start := time.Now()
		if l, err := newL(cfg); err == nil || l != nil {
			t.Fatalf("CheckRefuse with the server down: %v, %v; want an error", l, err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("CheckRefuse took %v; CheckTimeout 500ms", el)
		}
		cfg.ServerCheck = CheckSkip
		l, err := newL(cfg)
		if err != nil || l == nil {
			t.Fatalf("CheckSkip with the server down: %v", err)
		}
		cfg.ServerCheck = CheckWarn
		cfg.Logger = nil
		if l, err := newL(cfg); err != nil || l == nil {
			t.Fatalf("CheckWarn with the server down: %v", err)
		}
	})
}

// audit12WrapsCause reports whether err wraps an error other than
// ErrDegraded (the cause).
func audit12WrapsCause(err error) bool {
	var errs []error
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		errs = u.Unwrap()
	case interface{ Unwrap() error }:
		errs = []error{u.Unwrap()}
	}
	for _, e := range errs {
		if e != nil && e != ErrDegraded {
			return true
		}
	}
	return false
}

// RetryAfter where the ideal (rational) wait is a whole number of ms
// (API.md: "Global limits run on Redis ... with the same exactness" as
// package limit, whose RetryAfter is such that "a retry at t+RetryAfter is
// admitted and one 1 ms earlier is not"). Rate 3/s, Burst 7, fake clock:
// AllowN(4) at t0; at t0+1ms AllowN(3) is admitted (debt 6.997); AllowN(3)
// is then denied, and the rational bucket admits it after exactly
// (6.997+3-7)/0.003 = 999 ms. Both counting in units of 1/1000 token
// (3 drained per ms), package limit (both engines) and the Redis limiter
// answer 999 ms (a float32 debt in tokens, rounded up, answered 1000).
// Checked: the same answer as package limit, and self-consistency
// (denied 1 ms before, admitted at it).
func TestAudit12RetryAfterWholeMs(t *testing.T) {
	// Package limit's answer on the same sequence.
	var want []time.Duration
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		ll, err := limit.New(3, 7, limit.WithClock(clk), limit.WithEngine(eng))
		if err != nil {
			t.Fatal(err)
		}
		ll.AllowN(clk.Now(), "k", 4)
		clk.Advance(time.Millisecond)
		ll.AllowN(clk.Now(), "k", 3)
		want = append(want, ll.DecideN(clk.Now(), "k", 3).RetryAfter)
	}
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a12w", Limit: PerSecond(3, 7), Clock: clk})
		ctx := context.Background()
		if d, err := l.AllowN(ctx, "k", 4); err != nil || !d.Allowed {
			t.Fatalf("AllowN 4: %+v %v", d, err)
		}
		clk.Advance(time.Millisecond)
		if d, err := l.AllowN(ctx, "k", 3); err != nil || !d.Allowed {
			t.Fatalf("AllowN 3: %+v %v", d, err)
		}
		d, err := l.AllowN(ctx, "k", 3)
		if err != nil || d.Allowed {
			t.Fatalf("AllowN 3 again: %+v %v; want a denial", d, err)
		}
		for i, w := range want {
			if d.RetryAfter != w {
				t.Errorf("RetryAfter = %v; package limit (engine %d) answers %v", d.RetryAfter, i, w)
			}
		}
		if d.RetryAfter != 999*time.Millisecond {
			t.Fatalf("RetryAfter = %v; the rational bucket's wait is 999ms", d.RetryAfter)
		}
		clk.Advance(d.RetryAfter - time.Millisecond)
		if d, err := l.AllowN(ctx, "k", 3); err != nil || d.Allowed {
			t.Errorf("retry 1 ms before RetryAfter admitted: %+v %v", d, err)
		}
		clk.Advance(time.Millisecond)
		if d, err := l.AllowN(ctx, "k", 3); err != nil || !d.Allowed {
			t.Errorf("retry at RetryAfter denied: %+v %v", d, err)
		}
	})
}

// The go-redis client kinds the package doc names beyond Client and
// ClusterClient ("a go-redis v9 redis.UniversalClient (Client,
// ClusterClient, Ring, or an AutoPipeliner), standalone or Redis
// Cluster"), which no other test runs against a server: a Ring over two
// standalone servers (the sketch sharded so its hash tags land on both)
// and an AutoPipeliner. 2 instances x 8 goroutines on 6 keys, a frozen
// clock: exactly Burst per key; the start-up check (CheckRefuse) passes.
func TestAudit12GoRedisRingAndAutoPipeliner(t *testing.T) {
	const burst = 9
	keys := []string{"a", "b", "c", "d", "e", "f"}
	run := func(t *testing.T, mk func() goredis.UniversalClient) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		var ls []*Limiter
		for range 2 {
			c := mk()
			l, err := NewLimiterGoRedis(c, LimiterConfig{Name: "a12r", Limit: PerSecond(1, burst), Shards: 8, Clock: clk, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		errc := make(chan error, 16)
		for _, l := range ls {
			for g := range 8 {
				wg.Add(1)
				go func(l *Limiter, g int) {
					defer wg.Done()
					for i := range 24 {
						k := keys[(i+g)%len(keys)]
						d, err := l.Allow(context.Background(), k)
						if err != nil {
							errc <- err
							return
						}
						if d.Allowed {
							mu.Lock()
							got[k]++
							mu.Unlock()
						}
					}
				}(l, g)
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		for _, k := range keys {
			if got[k] != burst {
				t.Errorf("key %s: admitted %d; want exactly %d (all: %v)", k, got[k], burst, got)
			}
		}
	}
	t.Run("Ring", func(t *testing.T) {
		s1, s2 := startServer(t), startServer(t)
		run(t, func() goredis.UniversalClient {
			c := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"s1": s1.addr(), "s2": s2.addr()}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			return c
		})
		// Both shards of the ring hold sketch keys.
		for i, s := range []*testServer{s1, s2} {
			n, err := s.direct(t).Do(context.Background(), s.direct(t).B().Dbsize().Build()).AsInt64()
			if err != nil || n == 0 {
				t.Errorf("ring shard %d holds %d keys (%v); the sketch's 8 shards should spread over both", i, n, err)
			}
		}
	})
	t.Run("AutoPipeliner", func(t *testing.T) {
		s := startServer(t)
		run(t, func() goredis.UniversalClient {
			c := goredis.NewClient(&goredis.Options{Addr: s.addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			ap, err := c.AutoPipeline()
			if err != nil {
				t.Fatal(err)
			}
			return ap
		})
	})
}

// Issue 17: "Server memory is L×M×8 bytes per generation whatever the
// number of keys; generations rotate on the server"; package doc:
// "Server memory is Shards x Generations x (40 + L*M*8) bytes whatever the
// number of keys", and Keys() lists every shard's generation strings.
func TestAudit12ServerMemoryFlat(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	s := e.sketch(t, Config{Name: "a12m", Levels: 3, CellsPerLevel: 1000, Hi: 100, Period: time.Second, Generations: 3, Shards: 2, Clock: clk})
	if want := int64(2 * 3 * (40 + 3*1000*8)); s.MemoryBytes() != want {
		t.Fatalf("MemoryBytes = %d; want %d", s.MemoryBytes(), want)
	}
	if len(s.Keys()) != 6 {
		t.Fatalf("Keys = %v; want 6 (2 shards x 3 generations)", s.Keys())
	}
	ctx := context.Background()
	admin := e.srv.direct(t)
	total := func() int64 {
		var sum int64
		for _, k := range s.Keys() {
			n, err := admin.Do(ctx, admin.B().Strlen().Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		return sum
	}
	for round := range 4 {
		for i := range 500 {
			if err := s.Update(ctx, fmt.Sprintf("key-%d-%d", round, i), 1); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Second)
		if got := total(); got != s.MemoryBytes() {
			t.Fatalf("round %d: the generation strings hold %d bytes; MemoryBytes %d", round, got, s.MemoryBytes())
		}
	}
	n, err := admin.Do(ctx, admin.B().Dbsize().Build()).AsInt64()
	if err != nil || n != 6 {
		t.Fatalf("DBSIZE = %d (%v); want the 6 generation strings only", n, err)
	}
}
