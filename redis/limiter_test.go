package redis

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func mustLimiter(t testing.TB, c rueidis.Client, cfg LimiterConfig) *Limiter {
	t.Helper()
	l, err := NewLimiter(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLimiterConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  LimiterConfig
		want string
	}{
		{"rate", LimiterConfig{Name: "a", Limit: PerSecond(0, 1)}, "Limit.Rate"},
		{"burst", LimiterConfig{Name: "a", Limit: PerSecond(1, -1)}, "Limit.Burst"},
		{"policy", LimiterConfig{Name: "a", Limit: PerSecond(1, 1), Policy: 9}, "Policy"},
		{"precheck", LimiterConfig{Name: "a", Limit: PerSecond(1, 1), PreCheck: true}, "PreCheck needs DenyCacheCells"},
		{"name", LimiterConfig{Limit: PerSecond(1, 1)}, "Name"},
		{"server check", LimiterConfig{Name: "a", Limit: PerSecond(1, 1), ServerCheck: 7}, "ServerCheck"},
		{"check timeout", LimiterConfig{Name: "a", Limit: PerSecond(1, 1), CheckTimeout: -1}, "CheckTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLimiter(fakeClient{}, tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want ErrInvalidConfig containing %q", err, tt.want)
			}
			gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
			defer gc.Close()
			_, err = NewLimiterGoRedis(gc, tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("go-redis: err = %v; want ErrInvalidConfig containing %q", err, tt.want)
			}
		})
	}
}

// TestGoRedisNeedsContextTimeouts: a go-redis client that ignores context
// deadlines is refused, since Timeout would bound nothing.
func TestGoRedisNeedsContextTimeouts(t *testing.T) {
	for name, c := range map[string]goredis.UniversalClient{
		"Client":        goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}),
		"ClusterClient": goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
		"Ring":          goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
	} {
		_, err1 := NewGoRedis(c, Config{Name: "a", Hi: 1})
		_, err2 := NewLimiterGoRedis(c, LimiterConfig{Name: "a", Limit: PerSecond(1, 1)})
		for _, err := range []error{err1, err2} {
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
				t.Errorf("%s: err = %v; want ErrInvalidConfig naming ContextTimeoutEnabled", name, err)
			}
		}
		c.Close()
	}
	if _, err := NewGoRedis(nil, Config{Name: "a", Hi: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil client: err = %v", err)
	}
}

// fakeClient satisfies rueidis.Client for tests that never call it.
type fakeClient struct{ rueidis.Client }

// TestLimiterExactGlobally: instances (clients) racing AllowN on one key
// admit exactly Burst when the refill over the test is below one token,
// at several GOMAXPROCS, with and without the deny cache.
func TestLimiterExactGlobally(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
		const burst, clients, perClient = 300, 4, 8
		for _, procs := range []int{1, 2, 4} {
			for _, cells := range []uint32{0, 1024} {
				t.Run(fmt.Sprintf("procs=%d/denycache=%d", procs, cells), func(t *testing.T) {
					runtime.GOMAXPROCS(procs)
					name := e.ns(fmt.Sprintf("lim:%d:%d", procs, cells))
					var admitted, denied atomic.Int64
					var wg sync.WaitGroup
					for range clients {
						l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1e-3, burst), DenyCacheCells: cells, PreCheck: cells > 0})
						for range perClient {
							wg.Add(1)
							go func() {
								defer wg.Done()
								for range 2 * burst / (clients * perClient) {
									d, err := l.Allow(context.Background(), "hot")
									if err != nil {
										t.Error(err)
										return
									}
									if d.Allowed {
										admitted.Add(1)
									} else {
										denied.Add(1)
									}
								}
							}()
						}
					}
					wg.Wait()
					if got := admitted.Load(); got != burst {
						t.Fatalf("admitted %d (denied %d); want exactly %d", got, denied.Load(), burst)
					}
				})
			}
		}
	})
}

// TestRetryAfterExact: the wait a denial reports is the first whole ms at
// which the same request is admitted; one ms earlier it is still denied.
func TestRetryAfterExact(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) { testRetryAfterExact(t, e) })
}

func testRetryAfterExact(t *testing.T, e *env) {
	tests := []struct {
		name        string
		rate, burst float64
		take, n     float64
		retry       time.Duration
	}{
		{"one token at 2/s", 2, 10, 10, 1, 500 * time.Millisecond},
		{"three tokens at 3/s", 3, 10, 10, 3, time.Second},
		{"fractional ms", 3, 10, 10, 1, 334 * time.Millisecond},
		{"partly drained", 10, 5, 4, 3, 200 * time.Millisecond},
	}
	for _, cache := range []uint32{0, 256} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/cache=%d", tt.name, cache), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(5_000)
				l := e.limiter(t, LimiterConfig{Name: e.ns(fmt.Sprint("retry:", tt.name, cache)), Limit: PerSecond(tt.rate, tt.burst), DenyCacheCells: cache, Clock: clk})
				ctx := context.Background()
				if d, err := l.AllowN(ctx, "k", tt.take); err != nil || !d.Allowed || d.RetryAfter != -1 {
					t.Fatalf("first AllowN = %+v, %v", d, err)
				}
				d, err := l.AllowN(ctx, "k", tt.n)
				if err != nil || d.Allowed || d.RetryAfter != tt.retry {
					t.Fatalf("AllowN = %+v, %v; want denied with RetryAfter %v", d, err, tt.retry)
				}
				if want := time.Duration(tt.take / tt.rate * float64(time.Second)).Round(time.Millisecond); d.ResetAfter < want-time.Millisecond || d.ResetAfter > want+time.Millisecond {
					t.Fatalf("ResetAfter = %v; want about %v", d.ResetAfter, want)
				}
				clk.Advance(tt.retry - time.Millisecond)
				if d, _ := l.AllowN(ctx, "k", tt.n); d.Allowed {
					t.Fatalf("admitted 1ms before RetryAfter: %+v", d)
				}
				clk.Advance(time.Millisecond)
				if d, err := l.AllowN(ctx, "k", tt.n); err != nil || !d.Allowed {
					t.Fatalf("denied at RetryAfter: %+v, %v", d, err)
				}
			})
		}
	}
	t.Run("n above burst", func(t *testing.T) {
		l := e.limiter(t, LimiterConfig{Name: e.ns("retry:big"), Limit: PerSecond(1, 5)})
		if d, err := l.AllowN(context.Background(), "k", 6); err != nil || d.Allowed || d.RetryAfter != -1 {
			t.Fatalf("AllowN(6) over burst 5 = %+v, %v; want denied, RetryAfter -1", d, err)
		}
	})
}

// TestDenyCacheSavesRoundTrips: a hot abusive key, once denied, is denied
// locally with no round trip until its debt has drained, and then goes
// back to the server.
func TestDenyCacheSavesRoundTrips(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) { testDenyCacheSavesRoundTrips(t, e) })
}

func testDenyCacheSavesRoundTrips(t *testing.T, e *env) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1)
	l := e.limiter(t, LimiterConfig{Name: e.ns("dc"), Limit: PerSecond(10, 20), DenyCacheCells: 1024, Clock: clk})
	ctx := context.Background()
	admitted := 0
	for range 1000 {
		d, err := l.Allow(ctx, "abuser")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	st := l.Stats()
	if admitted != 20 || st.ServerCalls != 21 || st.CacheDenials != 979 {
		t.Fatalf("admitted %d, stats %+v; want 20 admitted, 21 round trips, 979 cache denials", admitted, st)
	}
	clk.Advance(100 * time.Millisecond) // one token back
	if d, err := l.Allow(ctx, "abuser"); err != nil || !d.Allowed {
		t.Fatalf("after refill: %+v, %v", d, err)
	}
	if got := l.Stats().ServerCalls; got != 22 {
		t.Fatalf("ServerCalls = %d; want 22", got)
	}
	if d, _ := l.Allow(ctx, "innocent"); !d.Allowed {
		t.Fatal("another key was denied")
	}
}
