package redis_test

// Compile-level conformance of the redis module against its contract:
// issues 17, 27, 28, docs/distributed.md and the package doc. Every
// stated name is pinned here with the signature the docs give, so a
// rename or a signature change breaks this file at compile time.

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	gredis "github.com/lfgrudge/grudge/redis"
	"github.com/lfgrudge/grudge/sketch"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Constructors: rueidis (issue 17: "Client: ... github.com/redis/rueidis")
// and go-redis v9 (issue 27: "A go-redis v9 adapter (redis.UniversalClient,
// Cluster included) beside rueidis").
var (
	audit12New               func(rueidis.Client, gredis.Config) (*gredis.Sketch, error)                  = gredis.New
	audit12NewGoRedis        func(goredis.UniversalClient, gredis.Config) (*gredis.Sketch, error)         = gredis.NewGoRedis
	audit12NewLimiter        func(rueidis.Client, gredis.LimiterConfig) (*gredis.Limiter, error)          = gredis.NewLimiter
	audit12NewLimiterGoRedis func(goredis.UniversalClient, gredis.LimiterConfig) (*gredis.Limiter, error) = gredis.NewLimiterGoRedis
	audit12PerSecond         func(rate, burst float64) gredis.Limit                                       = gredis.PerSecond
	audit12Library           func() (name, code string)                                                   = gredis.Library
	audit12Suggest           func(keys int, deny float64, shards uint32) (gredis.Size, error)             = gredis.Suggest
)

// Sketch operations (issue 17: "Operations: Update, Query, TryUpdate, and
// the limit reading (AllowN with an exact RetryAfter)").
var (
	audit12Update         func(*gredis.Sketch, context.Context, string, float64) error                     = (*gredis.Sketch).Update
	audit12Query          func(*gredis.Sketch, context.Context, string) (float64, error)                   = (*gredis.Sketch).Query
	audit12TryUpdate      func(*gredis.Sketch, context.Context, string, float64, float64) (bool, error)    = (*gredis.Sketch).TryUpdate
	audit12UpdateAndQuery func(*gredis.Sketch, context.Context, string, float64) (float64, error)          = (*gredis.Sketch).UpdateAndQuery
	audit12Check          func(*gredis.Sketch, context.Context) error                                      = (*gredis.Sketch).Check
	audit12SketchConfig   func(*gredis.Sketch) gredis.Config                                               = (*gredis.Sketch).Config
	audit12Keys           func(*gredis.Sketch) []string                                                    = (*gredis.Sketch).Keys
	audit12MemoryBytes    func(*gredis.Sketch) int64                                                       = (*gredis.Sketch).MemoryBytes
	audit12Allow          func(*gredis.Limiter, context.Context, string) (gredis.Decision, error)          = (*gredis.Limiter).Allow
	audit12AllowN         func(*gredis.Limiter, context.Context, string, float64) (gredis.Decision, error) = (*gredis.Limiter).AllowN
	audit12Decide         func(*gredis.Limiter, context.Context, string, int) (limit.Decision, error)      = (*gredis.Limiter).DecideContext
	audit12Policies       func(*gredis.Limiter) []limit.Policy                                             = (*gredis.Limiter).Policies
	audit12Degraded       func(*gredis.Limiter) bool                                                       = (*gredis.Limiter).Degraded
	audit12Stats          func(*gredis.Limiter) gredis.Stats                                               = (*gredis.Limiter).Stats
	audit12Limit          func(*gredis.Limiter) gredis.Limit                                               = (*gredis.Limiter).Limit
	audit12LimiterSketch  func(*gredis.Limiter) *gredis.Sketch                                             = (*gredis.Limiter).Sketch
	audit12PolicyString   func(gredis.Policy) string                                                       = gredis.Policy.String
	audit12CheckString    func(gredis.ServerCheck) string                                                  = gredis.ServerCheck.String
)

// Issue 28: "httplimit built on a small interface that limit.Limiter,
// limit.Multi and the Redis Limiter implement".
var _ httplimit.Limiter = (*gredis.Limiter)(nil)

// Error values (issue 27: "Clear errors that name the cause"; the
// degraded signal of issue 17).
var audit12Errors = []error{
	gredis.ErrDegraded, gredis.ErrEvictionPolicy, gredis.ErrInvalidConfig,
	gredis.ErrNoFunctions, gredis.ErrPermission,
}

// RequiredACL is a string constant (issue 27: "list them in the docs").
const audit12ACL string = gredis.RequiredACL

// The go-redis client kinds issue 27 names (Client, ClusterClient, Ring,
// AutoPipeliner) are UniversalClients the constructors accept.
var (
	_ goredis.UniversalClient = (*goredis.Client)(nil)
	_ goredis.UniversalClient = (*goredis.ClusterClient)(nil)
	_ goredis.UniversalClient = (*goredis.Ring)(nil)
)

func TestAudit12APICompile(t *testing.T) {
	for _, f := range []any{
		audit12New, audit12NewGoRedis, audit12NewLimiter, audit12NewLimiterGoRedis, audit12PerSecond,
		audit12Library, audit12Suggest, audit12Update, audit12Query, audit12TryUpdate, audit12UpdateAndQuery,
		audit12Check, audit12SketchConfig, audit12Keys, audit12MemoryBytes, audit12Allow, audit12AllowN,
		audit12Decide, audit12Policies, audit12Degraded, audit12Stats, audit12Limit, audit12LimiterSketch,
		audit12PolicyString, audit12CheckString,
	} {
		if f == nil {
			t.Fatal("nil function value")
		}
	}
	for _, e := range audit12Errors {
		if e == nil || !errors.Is(e, e) {
			t.Fatal("nil error value")
		}
	}
	if audit12ACL == "" {
		t.Fatal("RequiredACL empty")
	}

	// Config: every field the package doc lists, with its stated type.
	var clk sketch.Clock
	cfg := gredis.Config{
		Name:          "n",
		Levels:        4,
		CellsPerLevel: 1024,
		Decay:         decay.Linear(1),
		Lo:            0,
		Hi:            10,
		Aggregator:    sketch.Min,
		Hasher:        sketch.SipHash(),
		Seed:          1,
		Period:        time.Second,
		Generations:   2,
		Shards:        1,
		Timeout:       time.Second,
		Clock:         clk,
	}
	_ = cfg
	// LimiterConfig: every field, stated types.
	lc := gredis.LimiterConfig{
		Name:           "n",
		Limit:          gredis.Limit{Rate: 10, Burst: 20},
		Levels:         4,
		CellsPerLevel:  1024,
		Hasher:         sketch.XXH3(),
		Seed:           2,
		Shards:         1,
		Timeout:        50 * time.Millisecond,
		Policy:         gredis.LocalFallback,
		Instances:      3,
		FallbackCells:  4096,
		DenyCacheCells: 1024,
		PreCheck:       true,
		ServerCheck:    gredis.CheckWarn,
		CheckTimeout:   time.Second,
		Logger:         slog.Default(),
		Clock:          clk,
	}
	_ = lc
	// Policies (issue 17: "an explicit fail-open / fail-closed /
	// local-fallback policy"); FailClosed is the zero value.
	var zero gredis.Policy
	if zero != gredis.FailClosed {
		t.Errorf("zero Policy = %v; want FailClosed", zero)
	}
	for _, p := range []gredis.Policy{gredis.FailClosed, gredis.FailOpen, gredis.LocalFallback} {
		if p.String() == "" {
			t.Errorf("Policy(%d).String() empty", p)
		}
	}
	var zc gredis.ServerCheck
	if zc != gredis.CheckRefuse {
		t.Errorf("zero ServerCheck = %v; want CheckRefuse", zc)
	}
	_ = []gredis.ServerCheck{gredis.CheckRefuse, gredis.CheckWarn, gredis.CheckSkip}

	// Decision: redis_rate's field names (Allowed, Limit, Remaining,
	// RetryAfter, ResetAfter) with this module's types.
	d := gredis.Decision{}
	var allowed bool = d.Allowed
	var lim gredis.Limit = d.Limit
	var rem float64 = d.Remaining
	var retry time.Duration = d.RetryAfter
	var reset time.Duration = d.ResetAfter
	var rate, burst float64 = lim.Rate, lim.Burst
	_, _, _, _, _, _ = allowed, rem, retry, reset, rate, burst

	// Stats (issue 17: "a degraded signal and counters").
	s := gredis.Stats{}
	var counters = []int64{s.Decisions, s.ServerCalls, s.ServerErrors, s.Timeouts,
		s.CacheDenials, s.PolicyAdmits, s.PolicyDenials, s.DegradedPeriod}
	_ = counters

	// Size (Suggest's answer).
	sz := gredis.Size{}
	var _ uint32 = sz.Levels + sz.CellsPerLevel + sz.Shards
	var _ int64 = sz.MemoryBytes
	var _ float64 = sz.Deny + sz.Got
}
