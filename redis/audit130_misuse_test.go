package redis

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/sketch"
	goredis "github.com/redis/go-redis/v9"
)

// audit130DownClient is a go-redis client to a port nothing listens on
// (nothing is sent by the constructors; calls fail fast).
func audit130DownClient(t *testing.T) *goredis.Client {
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = gc.Close() })
	return gc
}

// TestAudit130FixedTypedNilGoRedisClientPanics (audit 130; fixed at stop
// 64, the text below says what was wrong): NewGoRedis doc: "NewGoRedis
// is New over a go-redis v9 client", and New returns "an error matching
// ErrInvalidConfig" for an invalid argument (New(nil, ...) and
// NewGoRedis(nil, ...) do: "client must not be nil", client.go:120).
// Observed: a typed nil (*goredis.Client)(nil), (*goredis.ClusterClient)(nil)
// or (*goredis.Ring)(nil), the usual result of a failed or forgotten client
// construction stored in a UniversalClient, passes the == nil check and
// panics with a raw nil-pointer dereference in c.Options()
// (client.go:126-130), in NewGoRedis and NewLimiterGoRedis alike. Expected:
// an error matching ErrInvalidConfig, as for the untyped nil (httplimit.New
// refuses a typed-nil limiter the same way). Fix: in newGoredisConn, check
// the concrete pointer for nil in each case of the type switch (client.go
// :124-130) before calling Options.
func TestAudit130FixedTypedNilGoRedisClientPanics(t *testing.T) {
	cfg := Config{Name: "a130", Hi: 1}
	lcfg := LimiterConfig{Name: "a130", Limit: PerSecond(1, 1), ServerCheck: CheckSkip}
	for _, c := range []struct {
		name string
		cl   goredis.UniversalClient
	}{
		{"(*Client)(nil)", (*goredis.Client)(nil)},
		{"(*ClusterClient)(nil)", (*goredis.ClusterClient)(nil)},
		{"(*Ring)(nil)", (*goredis.Ring)(nil)},
	} {
		var err error
		msg := testpanic.Message(func() { _, err = NewGoRedis(c.cl, cfg) })
		if msg != "" || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewGoRedis(%s): panic %q, err %v; want an error matching ErrInvalidConfig", c.name, msg, err)
		}
		msg = testpanic.Message(func() { _, err = NewLimiterGoRedis(c.cl, lcfg) })
		if msg != "" || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewLimiterGoRedis(%s): panic %q, err %v; want an error matching ErrInvalidConfig", c.name, msg, err)
		}
	}
}

// TestAudit130NilClientsAndBadSketchConfigs: a nil client (rueidis or
// go-redis) is ErrInvalidConfig for all four constructors; a go-redis
// client without ContextTimeoutEnabled is ErrInvalidConfig; the Sketch
// Config's misuse (empty or braced Name, Levels 9, NaN or reversed bounds,
// a negative, sub-ms or fractional Period, Generations 1 or 1025 with a
// Period, Generations without one, Shards 16385, a custom Decay, a hasher
// factory returning nil) is ErrInvalidConfig, never a panic.
func TestAudit130NilClientsAndBadSketchConfigs(t *testing.T) {
	cfg := Config{Name: "a130", Hi: 1}
	lcfg := LimiterConfig{Name: "a130", Limit: PerSecond(1, 1), ServerCheck: CheckSkip}
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"New(nil)", func() error { _, err := New(nil, cfg); return err }},
		{"NewGoRedis(nil)", func() error { _, err := NewGoRedis(nil, cfg); return err }},
		{"NewLimiter(nil)", func() error { _, err := NewLimiter(nil, lcfg); return err }},
		{"NewLimiterGoRedis(nil)", func() error { _, err := NewLimiterGoRedis(nil, lcfg); return err }},
	} {
		var err error
		if msg := testpanic.Message(func() { err = c.f() }); msg != "" || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: panic %q, err %v; want ErrInvalidConfig", c.name, msg, err)
		}
	}
	noTimeout := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer noTimeout.Close()
	if _, err := NewGoRedis(noTimeout, cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewGoRedis without ContextTimeoutEnabled: %v, want ErrInvalidConfig", err)
	}
	gc := audit130DownClient(t)
	nilHasher := sketch.HasherFactory(func(uint64) sketch.Hasher { return nil })
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"empty Name", Config{Hi: 1}},
		{"Name {", Config{Name: "a{", Hi: 1}},
		{"Name }", Config{Name: "}", Hi: 1}},
		{"Levels 9", Config{Name: "a", Hi: 1, Levels: 9}},
		{"Hi NaN", Config{Name: "a", Hi: math.NaN()}},
		{"Lo NaN", Config{Name: "a", Lo: math.NaN(), Hi: 1}},
		{"Lo > Hi", Config{Name: "a", Lo: 2, Hi: 1}},
		{"Hi +Inf", Config{Name: "a", Hi: math.Inf(1)}},
		{"Lo -Inf", Config{Name: "a", Lo: math.Inf(-1), Hi: 1}},
		{"Period -1", Config{Name: "a", Hi: 1, Period: -1}},
		{"Period MinInt64", Config{Name: "a", Hi: 1, Period: math.MinInt64}},
		{"Period 999us", Config{Name: "a", Hi: 1, Period: 999 * time.Microsecond}},
		{"Period 1.5ms", Config{Name: "a", Hi: 1, Period: 1500 * time.Microsecond}},
		{"Generations 1 with Period", Config{Name: "a", Hi: 1, Period: time.Second, Generations: 1}},
		{"Generations 1025", Config{Name: "a", Hi: 1, Period: time.Second, Generations: 1025}},
		{"Generations without Period", Config{Name: "a", Hi: 1, Generations: 3}},
		{"Shards 16385", Config{Name: "a", Hi: 1, Shards: 16385}},
		{"Shards MaxUint32", Config{Name: "a", Hi: 1, Shards: math.MaxUint32}},
		{"Aggregator 99", Config{Name: "a", Hi: 1, Aggregator: 99}},
		{"custom Decay", Config{Name: "a", Hi: 1, Decay: audit130Decay{}}},
		{"Exponential NaN", Config{Name: "a", Hi: 1, Decay: audit130Exp(math.NaN())}},
		{"nil-returning Hasher", Config{Name: "a", Hi: 1, Hasher: nilHasher}},
		{"Timeout -1", Config{Name: "a", Hi: 1, Timeout: -1}},
	} {
		var err error
		if msg := testpanic.Message(func() { _, err = NewGoRedis(gc, c.cfg) }); msg != "" {
			t.Errorf("%s: NewGoRedis panicked: %s", c.name, msg)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewGoRedis = %v, want ErrInvalidConfig", c.name, err)
		}
	}
}

type audit130Decay struct{}

func (audit130Decay) Apply(score float64, _ int64) float64 { return score }

// audit130Exp builds decay.Exponential, turning its panic (if it panics
// on NaN) into decay.None's stand-in so the case still exercises New.
func audit130Exp(lambda float64) (d decay.Decay) {
	defer func() {
		if recover() != nil {
			d = audit130Decay{}
		}
	}()
	return decay.Exponential(lambda)
}

// TestAudit130SketchBadDeltasPanicBeforeTheServer: Update, UpdateAndQuery
// and TryUpdate panic on a NaN or ±Inf delta (and TryUpdate on such a
// limit), as documented, without waiting on the unreachable server; an
// empty and a 1 MiB key reach the server (an error here, never a panic); a
// nil *Limiter's Policies is nil (documented).
func TestAudit130SketchBadDeltasPanicBeforeTheServer(t *testing.T) {
	gc := audit130DownClient(t)
	s, err := NewGoRedis(gc, Config{Name: "a130", Hi: 10, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"Update", func() { _ = s.Update(ctx, "k", v) }},
			{"UpdateAndQuery", func() { _, _ = s.UpdateAndQuery(ctx, "k", v) }},
			{"TryUpdate delta", func() { _, _ = s.TryUpdate(ctx, "k", v, 5) }},
			{"TryUpdate limit", func() { _, _ = s.TryUpdate(ctx, "k", 1, v) }},
		} {
			start := time.Now()
			if got := testpanic.Message(c.f); got == "" {
				t.Errorf("%s(%v): no panic (documented: it panics)", c.name, v)
			} else if !strings.HasPrefix(got, "redis") && !strings.HasPrefix(got, "sketch") {
				t.Errorf("%s(%v): panic %q does not name the package", c.name, v, got)
			}
			if d := time.Since(start); d > 250*time.Millisecond {
				t.Errorf("%s(%v): panicked only after %v (a round trip was attempted first)", c.name, v, d)
			}
		}
	}
	for _, k := range []string{"", strings.Repeat("k", 1<<20)} {
		if msg := testpanic.Message(func() {
			if _, err := s.Query(ctx, k); err == nil {
				t.Errorf("Query(key len %d) on a down server: nil error", len(k))
			}
		}); msg != "" {
			t.Errorf("Query(key len %d): panicked: %s", len(k), msg)
		}
	}
	var nl *Limiter
	if msg := testpanic.Message(func() {
		if p := nl.Policies(); p != nil {
			t.Errorf("nil Limiter Policies = %v, want nil", p)
		}
	}); msg != "" {
		t.Errorf("nil Limiter Policies panicked: %s", msg)
	}
	// The zero Limiter and zero Sketch panic clearly, as their docs say
	// since stop 64 (they crashed with a nil dereference before), as
	// package limit's and sketch's zero values do.
	var zl Limiter
	var zs Sketch
	var admitted bool
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Limiter.AllowN": {func() {
			d, err := zl.AllowN(ctx, "k", 1)
			admitted = err == nil && d.Allowed
		}, "redis: zero Limiter; use NewLimiter"},
		"Limiter.Allow":         {func() { _, _ = zl.Allow(ctx, "k") }, "redis: zero Limiter; use NewLimiter"},
		"Limiter.DecideContext": {func() { _, _ = zl.DecideContext(ctx, "k", 1) }, "redis: zero Limiter; use NewLimiter"},
		"Sketch.Update":         {func() { _ = zs.Update(ctx, "k", 1) }, "redis: zero Sketch; use New"},
		"Sketch.UpdateAndQuery": {func() { _, _ = zs.UpdateAndQuery(ctx, "k", 1) }, "redis: zero Sketch; use New"},
		"Sketch.Query":          {func() { _, _ = zs.Query(ctx, "k") }, "redis: zero Sketch; use New"},
		"Sketch.TryUpdate":      {func() { _, _ = zs.TryUpdate(ctx, "k", 1, 2) }, "redis: zero Sketch; use New"},
		"Sketch.Check":          {func() { _ = zs.Check(ctx) }, "redis: zero Sketch; use New"},
	} {
		if msg := testpanic.Message(c.f); msg != c.want {
			t.Errorf("zero %s: panic %q; want %q", name, msg, c.want)
		}
	}
	if admitted {
		t.Errorf("the zero Limiter admitted a request")
	}
}

// TestAudit130SuggestBadInputs: Suggest's keys < 1, deny outside (0, 1)
// (NaN, ±Inf, 0, 1, -0) and shards above 16384 are ErrInvalidConfig, never
// a panic (Suggest doc).
func TestAudit130SuggestBadInputs(t *testing.T) {
	for _, c := range []struct {
		keys   int
		deny   float64
		shards uint32
	}{
		{0, 0.01, 1}, {-1, 0.01, 1}, {math.MinInt, 0.01, 1},
		{10, 0, 1}, {10, 1, 1}, {10, math.NaN(), 1}, {10, math.Inf(1), 1}, {10, math.Inf(-1), 1}, {10, math.Copysign(0, -1), 1},
		{10, 0.01, 16385}, {10, 0.01, math.MaxUint32}, {math.MaxInt, 0.01, 1}, {math.MaxInt, 1e-300, 16384},
	} {
		var err error
		if msg := testpanic.Message(func() { _, err = Suggest(c.keys, c.deny, c.shards) }); msg != "" {
			t.Errorf("Suggest(%d, %v, %d) panicked: %s", c.keys, c.deny, c.shards, msg)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Suggest(%d, %v, %d) = %v, want ErrInvalidConfig", c.keys, c.deny, c.shards, err)
		}
	}
}
