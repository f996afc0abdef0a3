package redis

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// a69NewLimiterNoPanic calls NewLimiterGoRedis (CheckSkip: nothing is
// sent) and turns a panic into an error string.
func a69NewLimiterNoPanic(cfg LimiterConfig) (l *Limiter, panicked string, err error) {
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer gc.Close()
	defer func() {
		if r := recover(); r != nil {
			panicked = strings.SplitN(strings.TrimSpace(strings.ReplaceAll(strings.TrimSpace(toString(r)), "\n", " ")), " goroutine", 2)[0]
		}
	}()
	cfg.ServerCheck = CheckSkip
	l, err = NewLimiterGoRedis(gc, cfg)
	return l, "", err
}

func toString(r any) string {
	if e, ok := r.(error); ok {
		return e.Error()
	}
	if s, ok := r.(string); ok {
		return s
	}
	return "non-string panic"
}

// TestAudit69FixedNewLimiterPanicsOnValidLimit (fixed in stop 47): limiter.go, Limit: "Both
// must be finite and > 0, and Burst/Rate ... at most 9e9 s"; NewLimiter
// "returns a Limiter for cfg ..., or an error matching ErrInvalidConfig".
// Two limits inside that contract make NewLimiter panic (a nil *big.Rat
// in internal/units) instead: Rate = MaxFloat64 (Fraction's tolerance
// 4 x (Nextafter(r, +Inf) - r) is +Inf, and big.Rat.SetFloat64(+Inf)
// returns nil: units.go, Fraction's Cmp(tol)), and a Rate below
// 1000/MaxFloat64 (5.56e-306; 1000/rate is +Inf, RoundUpBits's
// SetFloat64(v) nil: units.go:107).
func TestAudit69FixedNewLimiterPanicsOnValidLimit(t *testing.T) {
	for _, lim := range []Limit{PerSecond(math.MaxFloat64, math.MaxFloat64), PerSecond(5e-324, 1e-320), PerSecond(1e-307, 1e-300)} {
		if d := lim.Burst / lim.Rate; !(d <= 9e9) {
			t.Fatalf("%+v is outside the contract (Burst/Rate %v s)", lim, d)
		}
		_, p, err := a69NewLimiterNoPanic(LimiterConfig{Name: "a69panic", Limit: lim})
		if p != "" {
			t.Errorf("NewLimiter(%+v) (finite, > 0, Burst/Rate %v s <= 9e9) panicked: %s; want a Limiter or an error matching ErrInvalidConfig",
				lim, lim.Burst/lim.Rate, p)
		} else if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewLimiter(%+v): %v, want ErrInvalidConfig", lim, err)
		}
	}
}

// TestAudit69BadInputs: bad configurations are refused with
// ErrInvalidConfig (NaN, Inf, zero, negative rates and bursts; cells above
// 2^30 for the fallback and the deny cache) and never panic; extreme but
// valid ones (Instances 2^32-1, a tiny rate and burst) make limiters whose
// degraded decisions do not panic; AllowN and DecideContext panic exactly
// where documented (n NaN, Inf, < 0; DecideContext n <= 0).
func TestAudit69BadInputs(t *testing.T) {
	for _, cfg := range []LimiterConfig{
		{Name: "x", Limit: PerSecond(math.NaN(), 1)}, {Name: "x", Limit: PerSecond(1, math.NaN())},
		{Name: "x", Limit: PerSecond(math.Inf(1), 1)}, {Name: "x", Limit: PerSecond(1, math.Inf(1))},
		{Name: "x", Limit: PerSecond(0, 1)}, {Name: "x", Limit: PerSecond(-1, 1)}, {Name: "x", Limit: PerSecond(1, -1)},
		{Name: "x", Limit: PerSecond(1e-10, 10)},                                            // Burst/Rate 1e11 s
		{Name: "x", Limit: PerSecond(1e-300, 1e-297)},                                       // Burst below 2^-126 (stop 63, audit 123)
		{Name: "x", Limit: PerSecond(1e-47, 0x1p-126), Policy: LocalFallback, Instances: 2}, // Burst/N below 2^-126
		{Name: "", Limit: PerSecond(1, 1)}, {Name: "a{b", Limit: PerSecond(1, 1)},
		{Name: "x", Limit: PerSecond(1, 1), Policy: LocalFallback, FallbackCells: 1<<30 + 1},
		{Name: "x", Limit: PerSecond(1, 1), DenyCacheCells: 1<<30 + 1},
		{Name: "x", Limit: PerSecond(1, 1), Levels: 9}, {Name: "x", Limit: PerSecond(1, 1), CellsPerLevel: 1<<30 + 1},
		{Name: "x", Limit: PerSecond(1, 1), Policy: 3}, {Name: "x", Limit: PerSecond(1, 1), Timeout: -1},
		{Name: "x", Limit: PerSecond(1, 1), PreCheck: true},
	} {
		l, p, err := a69NewLimiterNoPanic(cfg)
		if p != "" || l != nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewLimiter(%+v): limiter %v, err %v, panic %q; want ErrInvalidConfig", cfg, l != nil, err, p)
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		lim  Limit
		inst uint32
	}{{PerSecond(1, 1), math.MaxUint32}, {PerSecond(1e-47, 3*0x1p-126), 3}, {PerSecond(3, 10), 3}} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l := a69DownLimiter(t, "a69x", c.lim, LocalFallback, c.inst, clk)
		for _, n := range []float64{0, 5e-324, c.lim.Burst / float64(c.inst), c.lim.Burst, math.MaxFloat64} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%+v over %d: AllowN(%v) panicked: %v", c.lim, c.inst, n, r)
					}
				}()
				if _, err := l.AllowN(ctx, "k", n); !errors.Is(err, ErrDegraded) {
					t.Errorf("%+v over %d: AllowN(%v): %v, want ErrDegraded", c.lim, c.inst, n, err)
				}
				if n >= 1 && n < math.MaxInt {
					if _, err := l.DecideContext(ctx, "k", int(n)); !errors.Is(err, ErrDegraded) {
						t.Errorf("%+v over %d: DecideContext(%v): %v", c.lim, c.inst, n, err)
					}
				}
			}()
		}
		mustPanic := func(what string, f func()) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic (documented)", what)
				}
			}()
			f()
		}
		for _, n := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -5e-324} {
			mustPanic("AllowN("+strconv.FormatFloat(n, 'g', -1, 64)+")", func() { l.AllowN(ctx, "k", n) })
		}
		mustPanic("DecideContext(0)", func() { l.DecideContext(ctx, "k", 0) })
		mustPanic("DecideContext(-1)", func() { l.DecideContext(ctx, "k", -1) })
	}
}

// TestAudit69OddKeys: on a real server, an empty key, a 1 MiB key, a key
// with NUL bytes and one spelling the sketch's own server key each get
// exactly Burst whole tokens (3 admitted, the 4th denied with a wait of
// 1/Rate), with the deny cache on; and a request of MaxFloat64 tokens is
// denied as never fitting, without error or panic.
func TestAudit69OddKeys(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a69keys", Limit: PerSecond(2, 3), CellsPerLevel: 1 << 12, DenyCacheCells: 1 << 10, Clock: clk,
		Timeout: 5 * time.Second})
	ctx := context.Background()
	for _, k := range []string{"", strings.Repeat("x", 1<<20), "a\x00b", "{a69keys}:g", "\xff\xfe"} {
		for i := range 4 {
			d, err := l.Allow(ctx, k)
			if err != nil || d.Allowed != (i < 3) || (i == 3 && d.RetryAfter != 500*time.Millisecond) {
				t.Errorf("key of %d bytes, call %d: %+v, %v; want admitted for calls 0-2, then denied with RetryAfter 500ms", len(k), i, d, err)
			}
		}
		dd, err := l.DecideContext(ctx, k, math.MaxInt)
		if err != nil || dd.Allowed || !dd.Never {
			t.Errorf("key of %d bytes: DecideContext(MaxInt) = %+v, %v; want a never-fitting denial", len(k), dd, err)
		}
	}
}
