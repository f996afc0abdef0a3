package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
)

// TestAudit46DiffConstructors runs redis_rate (v10.0.1, the module's test
// dependency) and this Limiter side by side on one redis-server, on the
// server's real clock, for redis_rate's own constructors PerSecond(10),
// PerMinute(1) and PerHour(100), each limiter on its own key (redis_rate
// prefixes "rate:"), the same AllowN sequence, each pair of calls back to
// back; audit3Pair.check compares Allowed (ours bool vs redis_rate's
// count == n), floor(Remaining) on admissions, RetryAfter (-1 on
// admissions, within the ms resolution plus the pair's span on denials,
// the documented -1 for n > Burst) and ResetAfter.
func TestAudit46DiffConstructors(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		rdb := goredis.NewClient(&goredis.Options{Addr: e.srv.addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		cases := []struct {
			name string
			rr   redis_rate.Limit
			seq  []int
		}{
			// TestAllow's and TestAllowN_IncrementZero's calls, then a denial.
			{"PerSecond(10)", redis_rate.PerSecond(10), []int{0, 1, 0, 2, 7, 0, 1000, 1, 0}},
			{"PerMinute(1)", redis_rate.PerMinute(1), []int{0, 1, 0, 1, 2, 1000, 0, 1}},
			{"PerHour(100)", redis_rate.PerHour(100), append(append([]int{0}, a46Ones(99)...), 0, 1, 1, 50, 100, 101, 0)},
		}
		for _, cache := range []uint32{0, 256} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/denycache=%d", c.name, cache), func(t *testing.T) {
					lim := PerSecond(float64(c.rr.Rate)/c.rr.Period.Seconds(), float64(c.rr.Burst))
					l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a46diff:%s:%d", c.name, cache), Limit: lim, DenyCacheCells: cache, PreCheck: cache > 0})
					key := fmt.Sprintf("a46:%s:%d", c.name, cache)
					p := &audit3Pair{t: t, ours: l, rr: redis_rate.NewLimiter(rdb), rrLim: c.rr, key: key}
					const res = 25 * time.Millisecond // the ms resolution, and room for a loaded machine between the pair's calls
					var first time.Duration
					noise := 0
					for i, n := range c.seq {
						o := p.call(fmt.Sprintf("step %d n=%d", i, n), n)
						if i == 0 {
							first = o.span
						}
						a46PairCheck(p, o, res+first+o.span, &noise)
						if n == 0 && !o.d.Allowed {
							t.Errorf("step %d: n=0 peek: ours denied %+v", i, o.d)
						}
					}
					t.Logf("redis_rate's Remaining one below floor(ours) (its float truncation) on %d of %d calls", noise, len(c.seq))
				})
			}
		}
	})
}

// a46PairCheck is audit3Pair.check, except on admissions redis_rate's
// Remaining may be floor(ours) - 1 where ours is within 1e-3 above a whole
// number: redis_rate computes (now - (now + increment - burst_offset)) /
// emission_interval in float seconds since 2017 (~3e8, ulp ~6e-8) and
// Redis truncates the Lua number to an integer reply, so 8.9999999 comes
// back 8 where the exact bucket (ours, at ms resolution) has 9.
func a46PairCheck(p *audit3Pair, o audit3Obs, tol time.Duration, noise *int) {
	p.t.Helper()
	if o.d.Allowed && o.r.Allowed == int(o.n) {
		fl := math.Floor(o.d.Remaining)
		if o.r.Remaining == int(fl)-1 && o.d.Remaining-fl < 1e-3 {
			*noise++
			r := *o.r
			r.Remaining = int(fl)
			o.r = &r
		}
	}
	p.check(o, tol)
}

func a46Ones(k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = 1
	}
	return s
}

// TestAudit46DiffRetryAfterPerMs is redis_rate's TestRetryAfter (Rate 1
// per ms, Burst 1, 1000 Allows; every denial's RetryAfter at most 1 ms)
// run on both limiters on the real clock, ours with and without the deny
// cache.
func TestAudit46DiffRetryAfterPerMs(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		rdb := goredis.NewClient(&goredis.Options{Addr: e.srv.addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		rr := redis_rate.NewLimiter(rdb)
		rrLim := redis_rate.Limit{Rate: 1, Period: time.Millisecond, Burst: 1}
		for _, cache := range []uint32{0, 256} {
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprint("a46perms", cache), Limit: PerSecond(1000, 1), DenyCacheCells: cache})
			ctx := context.Background()
			var oursDenied, rrDenied int
			for i := 0; i < 1000; i++ {
				d, err := l.Allow(ctx, "test_id")
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					oursDenied++
					if d.RetryAfter > time.Millisecond || d.RetryAfter <= 0 {
						t.Fatalf("cache %d, call %d: ours denied with RetryAfter %v; redis_rate's test wants (0, 1ms]", cache, i, d.RetryAfter)
					}
				}
				r, err := rr.Allow(ctx, fmt.Sprint("test_id", cache), rrLim)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed == 0 {
					rrDenied++
					if r.RetryAfter > time.Millisecond {
						t.Fatalf("redis_rate RetryAfter %v", r.RetryAfter)
					}
				}
			}
			t.Logf("cache %d: denied of 1000: ours %d, redis_rate %d", cache, oursDenied, rrDenied)
		}
	})
}
