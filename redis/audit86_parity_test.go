package redis

// Audit 86: the redis Limiter's decisions against package limit and an
// exact rational token bucket, on a real redis-server and a fake clock
// (LimiterConfig.Clock), for exact configurations (limiter.go, Limiter:
// "When the rate is a short fraction ... whose units ... hold Burst in at
// most 2^24, ... every decision, RetryAfter and ResetAfter for
// whole-token (or whole-unit) requests is exactly the rational token
// bucket's at millisecond resolution"), up to the 2^24-unit bound, with
// random seeded schedules of AllowN and DecideContext calls, n > Burst,
// retries at RetryAfter and 1 ms before; and never-early for inexact
// configurations.

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit86Bucket is the rational token bucket in debt form: rate tokens
// per ms, burst tokens, the debt as of ms at.
type audit86Bucket struct {
	rate, burst, debt *big.Rat
	at                int64
}

func audit86NewBucket(lim Limit, at int64) *audit86Bucket {
	rate := new(big.Rat).SetFloat64(lim.Rate)
	if p, q, ok := units.Fraction(lim.Rate); ok {
		rate.SetFrac(p, q)
	}
	rate.Quo(rate, big.NewRat(1000, 1))
	return &audit86Bucket{rate: rate, burst: new(big.Rat).SetFloat64(lim.Burst), debt: new(big.Rat), at: at}
}

func (b *audit86Bucket) drain(now int64) {
	if now <= b.at {
		return
	}
	d := new(big.Rat).Mul(b.rate, big.NewRat(now-b.at, 1))
	b.debt.Sub(b.debt, d)
	if b.debt.Sign() < 0 {
		b.debt.SetInt64(0)
	}
	b.at = now
}

// audit86CeilMs is ceil(x / rate) in whole ms.
func audit86CeilMs(x, rate *big.Rat) int64 {
	q := new(big.Rat).Quo(x, rate)
	n := new(big.Int).Quo(q.Num(), q.Denom()) // floor for x >= 0
	if new(big.Rat).SetInt(n).Cmp(q) < 0 {
		n.Add(n, big.NewInt(1))
	}
	return n.Int64()
}

// audit86Want is the oracle's answer to a request of n at now (applied).
type audit86Want struct {
	allowed, never bool
	remaining      *big.Rat // burst - debt after
	retryMs        int64    // denied, n <= burst
	resetMs        int64
	nextMs         int64 // DecideContext's NextAfter (integer burst)
}

func (b *audit86Bucket) step(now int64, n float64) audit86Want {
	b.drain(now)
	nr := new(big.Rat).SetFloat64(n)
	var w audit86Want
	after := new(big.Rat).Add(b.debt, nr)
	switch {
	case nr.Cmp(b.burst) > 0:
		w.never = true
	case after.Cmp(b.burst) <= 0:
		w.allowed = true
		b.debt = after
	default:
		w.retryMs = audit86CeilMs(new(big.Rat).Sub(after, b.burst), b.rate)
	}
	w.remaining = new(big.Rat).Sub(b.burst, b.debt)
	w.resetMs = audit86CeilMs(b.debt, b.rate)
	fl := new(big.Int).Quo(w.remaining.Num(), w.remaining.Denom())
	if fl.Cmp(new(big.Int).Quo(b.burst.Num(), b.burst.Denom())) < 0 {
		// the next whole token: from rem to floor(rem)+1, where it is at
		// most the burst (a fractional burst's last fraction brings no
		// whole token: NextAfter 0, as limit.Decision says; audit 96)
		next := new(big.Rat).SetInt(fl.Add(fl, big.NewInt(1)))
		w.nextMs = audit86CeilMs(next.Sub(next, w.remaining), b.rate)
		if !w.allowed && !w.never && w.retryMs > 0 {
			w.nextMs = min(w.nextMs, w.retryMs)
		}
	}
	return w
}

// audit86ExactLimits are exact configurations, several at the 2^24-unit
// bound (units as internal/units chooses them).
var audit86ExactLimits = []Limit{
	PerSecond(3, 7),
	PerSecond(10, 20),
	PerSecond(3, 16777),           // unit 1000: 16,777,000 units
	PerSecond(10, 167772),         // unit 100
	PerSecond(1000.0/7, 2396745),  // Every(7ms): unit 7, drain 1
	PerSecond(1000.0/3600, 4660),  // 1000/h: unit 3600
	PerSecond(7.0/3, 5592),        // unit 3000, drain 7
	PerSecond(1000, 1<<24),        // unit 1: exactly 2^24
	PerSecond(1.0/60, 279),        // 1/min: unit 60000
	PerSecond(1000.0/13, 1290555), // Every(13ms)
	PerSecond(1000.0/1024, 16384), // Every(1.024s): unit 1024, 2^24 units
	PerSecond(10, 2.5),            // a fractional Burst: 250 units
}

// audit86Run drives one limiter and package limit on random steps and
// checks every field against the oracle. ints: n are whole tokens (and
// package limit is compared); otherwise n are whole units too.
func audit86Run(t *testing.T, e *env, lim Limit, cache, pre bool, seed uint64, steps int) {
	t.Helper()
	unit, _, exact, _ := units.Units(lim.Rate, lim.Burst)
	if !exact {
		t.Fatalf("setup: %+v is not exact", lim)
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	cfg := LimiterConfig{Name: e.ns(fmt.Sprintf("a86p:%v:%v:%v:%v:%d", lim.Rate, lim.Burst, cache, pre, seed)), Limit: lim, Clock: clk,
		CellsPerLevel: 256}
	key := "k"
	if e.cluster != nil {
		cfg.Shards = 5
		key = fmt.Sprintf("{%d}:{}:{k", seed)
	}
	if cache {
		cfg.DenyCacheCells, cfg.PreCheck = 256, pre
	}
	l := e.limiter(t, cfg)
	intBurst := lim.Burst == math.Trunc(lim.Burst)
	var ll *limit.Limiter
	if intBurst {
		var err error
		ll, err = limit.New(limit.Limit(lim.Rate), int(lim.Burst), limit.WithClock(clk), limit.WithMaxDebt(lim.Burst))
		if err != nil {
			t.Fatal(err)
		}
		if !ll.Exact() {
			t.Fatalf("setup: package limit not exact for %+v", lim)
		}
	}
	b := audit86NewBucket(lim, clk.NowMillis())
	rng := rand.New(rand.NewPCG(seed, 86))
	ctx := context.Background()
	full := 1000 * lim.Burst / lim.Rate // ms to drain a full bucket
	pickN := func() float64 {
		switch rng.IntN(8) {
		case 0:
			return lim.Burst
		case 1:
			return lim.Burst + 1
		case 2:
			return math.Max(1, math.Floor(lim.Burst*rng.Float64()))
		case 3:
			// whole units, not whole tokens: k/unit tokens
			k := 1 + rng.IntN(int(min(unit*lim.Burst, 1e6)))
			x := float64(k) / unit
			if new(big.Rat).SetFloat64(x).Cmp(new(big.Rat).Quo(big.NewRat(int64(k), 1), new(big.Rat).SetFloat64(unit))) != 0 {
				return 1 // k/unit not a float64: keep to whole tokens
			}
			return x
		default:
			return float64(1 + rng.IntN(3))
		}
	}
	var lastDenied float64
	var lastRetry time.Duration
	nextOff := 0
	defer func() {
		if nextOff > 0 {
			t.Logf("%d DecideContext NextAfters off the oracle", nextOff)
		}
	}()
	for i := range steps {
		var n float64
		switch {
		case lastRetry > time.Millisecond && rng.IntN(2) == 0:
			// retry the denied request 1 ms before, then at, RetryAfter
			if rng.IntN(2) == 0 {
				clk.Advance(lastRetry - time.Millisecond)
			} else {
				clk.Advance(lastRetry)
			}
			n = lastDenied
		default:
			switch rng.IntN(4) {
			case 0:
			case 1:
				clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
			case 2:
				clk.Advance(time.Duration(rng.Float64()*full/8) * time.Millisecond)
			case 3:
				clk.Advance(time.Duration(rng.Float64()*full*1.2) * time.Millisecond)
			}
			n = pickN()
		}
		now := clk.NowMillis()
		w := b.step(now, n)
		useDecide := n == math.Trunc(n) && n >= 1 && n < 1<<40 && rng.IntN(2) == 0
		where := fmt.Sprintf("step %d t+%dms n=%v", i, now-1_700_000_000_000, n)
		var lw limit.Decision
		if n != math.Trunc(n) {
			ll = nil // package limit takes whole tokens only: from here on the oracle alone
		}
		if ll != nil {
			lw = ll.DecideN(clk.Now(), key, int(n))
		}
		if useDecide {
			d, err := l.DecideContext(ctx, key, int(n))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			audit86CheckLimit(t, where+" DecideContext", d, w, lim)
			if want := time.Duration(w.nextMs) * time.Millisecond; d.NextAfter != want {
				// Exact since audit 86's fix (TestAudit86FixedNextAfterLateExact),
				// for a whole Burst; a fractional one computes it from
				// tokens: never early.
				if lim.Burst == math.Trunc(lim.Burst) || d.NextAfter < want {
					t.Fatalf("%s: NextAfter %v; oracle %d ms (package limit %v)", where, d.NextAfter, w.nextMs, lw.NextAfter)
				}
				nextOff++
			}
			if ll != nil {
				lw.Policy = d.Policy
				if d != lw {
					t.Fatalf("%s: DecideContext %+v; package limit %+v", where, d, lw)
				}
			}
		} else {
			d, err := l.AllowN(ctx, key, n)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			audit86CheckDecision(t, where+" AllowN", d, w, lim)
			if ll != nil {
				if d.Allowed != lw.Allowed {
					t.Fatalf("%s: Allowed %v; package limit %+v", where, d.Allowed, lw)
				}
				if !d.Allowed && !lw.Never && d.RetryAfter != lw.RetryAfter {
					t.Fatalf("%s: RetryAfter %v; package limit %v", where, d.RetryAfter, lw.RetryAfter)
				}
				if d.ResetAfter != lw.ResetAfter {
					t.Fatalf("%s: ResetAfter %v; package limit %v", where, d.ResetAfter, lw.ResetAfter)
				}
				if int(math.Floor(d.Remaining)) != lw.Remaining {
					t.Fatalf("%s: Remaining %v; package limit %d", where, d.Remaining, lw.Remaining)
				}
			}
		}
		lastRetry = 0
		if !w.allowed && !w.never {
			lastDenied, lastRetry = n, time.Duration(w.retryMs)*time.Millisecond
		}
	}
}

// audit86CheckDecision checks AllowN's Decision against the oracle.
func audit86CheckDecision(t *testing.T, where string, d Decision, w audit86Want, lim Limit) {
	t.Helper()
	if d.Allowed != w.allowed || d.Limit != lim {
		t.Fatalf("%s: %+v; oracle allowed=%v never=%v remaining %v", where, d, w.allowed, w.never, w.remaining.FloatString(6))
	}
	wantRetry := time.Duration(-1)
	if !w.allowed && !w.never {
		wantRetry = time.Duration(w.retryMs) * time.Millisecond
	}
	if d.RetryAfter != wantRetry {
		t.Fatalf("%s: RetryAfter %v; oracle %v (remaining %v)", where, d.RetryAfter, wantRetry, w.remaining.FloatString(6))
	}
	if d.ResetAfter != time.Duration(w.resetMs)*time.Millisecond {
		t.Fatalf("%s: ResetAfter %v; oracle %d ms", where, d.ResetAfter, w.resetMs)
	}
	rem, _ := w.remaining.Float64()
	if d.Remaining != rem && math.Abs(d.Remaining-rem) > 1e-15*lim.Burst*4 {
		t.Fatalf("%s: Remaining %v; oracle %v", where, d.Remaining, w.remaining.FloatString(9))
	}
}

// audit86CheckLimit checks DecideContext's limit.Decision against the
// oracle (integer Burst).
func audit86CheckLimit(t *testing.T, where string, d limit.Decision, w audit86Want, lim Limit) {
	t.Helper()
	fl := new(big.Int).Quo(w.remaining.Num(), w.remaining.Denom())
	wantRetry := time.Duration(0)
	switch {
	case w.never:
		wantRetry = limit.InfDuration
	case !w.allowed:
		wantRetry = time.Duration(w.retryMs) * time.Millisecond
	}
	if d.Allowed != w.allowed || d.Never != w.never || d.RetryAfter != wantRetry ||
		d.ResetAfter != time.Duration(w.resetMs)*time.Millisecond || int64(d.Remaining) != fl.Int64() ||
		d.Burst != int(lim.Burst) {
		t.Fatalf("%s: %+v; oracle allowed=%v never=%v retry %v reset %dms remaining %v (%s) next %dms",
			where, d, w.allowed, w.never, wantRetry, w.resetMs, fl, w.remaining.FloatString(6), w.nextMs)
	}
}

// TestAudit86ExactParity: every exact limit, plain, with the deny cache,
// and with PreCheck; rueidis and go-redis on standalone servers.
func TestAudit86ExactParity(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for li, lim := range audit86ExactLimits {
			for ci, c := range [][2]bool{{false, false}, {true, false}, {true, true}} {
				t.Run(fmt.Sprintf("%v/%v/cache=%v/pre=%v", lim.Rate, lim.Burst, c[0], c[1]), func(t *testing.T) {
					audit86Run(t, e, lim, c[0], c[1], uint64(100*li+ci), 200)
				})
			}
		}
	})
}

// TestAudit86ExactParityCluster: the same on the 3-master cluster,
// sharded (Shards 5), keys with hash-tag braces (the client hashes them:
// a brace in a key must not change its cells or its decisions).
func TestAudit86ExactParityCluster(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			for li, lim := range []Limit{PerSecond(3, 16777), PerSecond(1000.0/7, 50), PerSecond(1000.0/3600, 4660)} {
				t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
					audit86Run(t, e, lim, li%2 == 1, li == 2, uint64(900+li), 150)
				})
			}
		})
	}
}
