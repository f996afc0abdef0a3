package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// NewLimiter with extreme rates and bursts (tiny, subnormal, near the
// +Inf token, MaxFloat64, Inf, NaN, negative): a limiter or an error
// matching ErrInvalidConfig, never a panic; and a limiter built decides
// under every policy with the server down without panicking.
func TestAudit71RedisExtremeRates(t *testing.T) {
	vals := []float64{5e-324, 1e-320, 1e-307, 5.57e-306, 1e-300, 1e-9, 0.5, 1, 3, 1e9, 1e22, 1e300,
		math.MaxFloat64, math.Inf(1), math.NaN(), -1, 0}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { gc.Close() })
	built := 0
	for _, r := range vals {
		for _, b := range vals {
			for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
				what := fmt.Sprintf("NewLimiter(PerSecond(%v, %v), %v)", r, b, pol)
				func() {
					defer func() {
						if x := recover(); x != nil {
							t.Errorf("%s panicked: %v; want a limiter or ErrInvalidConfig", what, x)
						}
					}()
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a71r", Limit: PerSecond(r, b), Policy: pol, Instances: 3,
						ServerCheck: CheckSkip, Timeout: time.Second, Clock: clk, FallbackCells: 64})
					if err != nil {
						if !errors.Is(err, ErrInvalidConfig) {
							t.Errorf("%s: %v, want ErrInvalidConfig", what, err)
						}
						return
					}
					if !(r > 0) || math.IsInf(r, 0) || !(b > 0) || math.IsInf(b, 0) {
						t.Errorf("%s: accepted; doc: Rate and Burst finite and > 0", what)
					}
					built++
					ctx := context.Background()
					for _, n := range []float64{0, 1, b / 3, b} {
						if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
							continue
						}
						d, err := l.AllowN(ctx, "k", n)
						if !errors.Is(err, ErrDegraded) {
							t.Errorf("%s: AllowN(%v) with the server down: %v", what, n, err)
						}
						if d.Allowed && pol == FailClosed {
							t.Errorf("%s: FailClosed admitted under a fault", what)
						}
						clk.Set(clk.NowMillis() + 1000)
					}
				}()
			}
		}
	}
	if built == 0 {
		t.Fatal("no limiter built")
	}
}

// TestAudit71FixedRedisNewLimiterPanicsNearInfToken (fixed in stop 47: units.RoundUpBits returns +Inf past MaxFloat64): limiter.go,
// NewLimiter: a Rate and Burst must be finite and > 0 with Burst/Rate at
// most 9e9 s, else ErrInvalidConfig; docs/migrating.md (Stop 47): "bad
// input is an error, never a panic (audit 69)". PerSecond(r, b) with r
// the least rate whose token 1000/r ms is finite (5.562684646268004e-306)
// and b tiny enough to pass the drain bound (b <= 5e-296) panics: units.Units
// rounds the finite token up to m bits, which overflows to +Inf, and
// RoundUpBits's big.Rat of it is nil (internal/units/units.go:113),
// called from redis/limiter.go:246 before anything refuses it.
func TestAudit71FixedRedisNewLimiterPanicsNearInfToken(t *testing.T) {
	r := 1000 / math.MaxFloat64
	for math.IsInf(1000/r, 1) {
		r = math.Nextafter(r, 1)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { gc.Close() })
	for _, b := range []float64{1e-300, r, 5e-324} {
		func() {
			defer func() {
				if x := recover(); x != nil {
					t.Errorf("NewLimiter(PerSecond(%v, %v)) panicked: %v; want a limiter or ErrInvalidConfig (token 1000/r = %v ms rounds up to +Inf)", r, b, x, 1000/r)
				}
			}()
			_, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a71f", Limit: PerSecond(r, b), ServerCheck: CheckSkip})
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("NewLimiter(PerSecond(%v, %v)): %v, want ErrInvalidConfig", r, b, err)
			}
		}()
	}
}
