package redis

// Audit 96: a limiter's server state across a change of its Limit on the
// same Name (a deploy that changes the limit), and what a peek writes.
// Config: "Every instance that shares a sketch must use the same Config
// (the server stores a fingerprint of the law, bounds, aggregator, seed
// and rotation, and refuses a call made with another)"; doc.go: foreign
// data "is an error starting "grudge:" from the server; no call panics or
// overwrites it"; AllowN: the Policy decides a failed call, with an error
// matching ErrDegraded that wraps the cause; "n = 0 only reads ... it
// writes nothing, on the server".

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit96RedisLimitChangeRefused: a limiter at 10/s x 10 exhausts a
// key; instances with another Limit on the same Name (another law or
// Hi: 20/s x 10, 10/s x 20, and a limit counting tokens, 0.3/s x 10)
// are refused by the server: the Policy decides (FailOpen admits here),
// the error matches ErrDegraded and carries the server's "grudge:"
// error naming another configuration; the string is unchanged and the
// first limiter's debt stays as it was.
func TestAudit96RedisLimitChangeRefused(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_770_000_000_000)
	ctx := context.Background()
	orig := e.limiter(t, LimiterConfig{Name: "a96chg", Limit: PerSecond(10, 10), Clock: clk})
	for i := range 10 {
		if d, err := orig.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v, %v", i, d, err)
		}
	}
	key := orig.Sketch().Keys()[0]
	before, err := e.do(t, "GET", key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, lim := range []Limit{PerSecond(20, 10), PerSecond(10, 20), PerSecond(0.3, 10)} {
		l := e.limiter(t, LimiterConfig{Name: "a96chg", Limit: lim, Clock: clk, Policy: FailOpen})
		for _, n := range []float64{0, 1} {
			d, err := l.AllowN(ctx, "k", n)
			if !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "grudge: ") ||
				!strings.Contains(err.Error(), "another configuration") {
				t.Fatalf("%+v n=%v on the same Name: %+v, %v; want ErrDegraded with the server's grudge: error", lim, n, d, err)
			}
			if !d.Allowed || d.Limit != lim || !l.Degraded() {
				t.Fatalf("%+v n=%v: %+v, Degraded %v; want FailOpen's admission", lim, n, d, l.Degraded())
			}
		}
	}
	after, err := e.do(t, "GET", key).ToString()
	if err != nil || after != before {
		t.Fatalf("the refused calls changed %s (%d bytes to %d), %v", key, len(before), len(after), err)
	}
	d, err := orig.Allow(ctx, "k")
	if err != nil || d.Allowed || d.RetryAfter != 100*time.Millisecond || d.ResetAfter != time.Second {
		t.Fatalf("the first limiter after the refused calls: %+v, %v; want its debt intact (RetryAfter 100ms, ResetAfter 1s)", d, err)
	}
}

// TestAudit96RedisPeekWritesNothing: AllowN(n = 0) on a sketch nobody
// has written creates no key, and on a written one leaves the string's
// bytes as they were, with the deny cache and PreCheck on too (the cache
// is local); its Remaining and ResetAfter are the key's.
func TestAudit96RedisPeekWritesNothing(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_770_000_000_000)
	ctx := context.Background()
	for _, pre := range []bool{false, true} {
		cfg := LimiterConfig{Name: "a96peek", Limit: PerSecond(3, 10), Clock: clk}
		if pre {
			cfg.Name, cfg.DenyCacheCells, cfg.PreCheck = "a96peekpre", 256, true
		}
		l := e.limiter(t, cfg)
		key := l.Sketch().Keys()[0]
		d, err := l.AllowN(ctx, "k", 0)
		if err != nil || !d.Allowed || d.Remaining != 10 || d.ResetAfter != 0 || d.RetryAfter != -1 {
			t.Fatalf("pre=%v: peek of a fresh sketch: %+v, %v", pre, d, err)
		}
		if n, err := e.do(t, "EXISTS", key).AsInt64(); err != nil || n != 0 {
			t.Fatalf("pre=%v: a peek of a fresh sketch created %s (EXISTS %d, %v)", pre, key, n, err)
		}
		if d, err := l.AllowN(ctx, "k", 4); err != nil || !d.Allowed {
			t.Fatalf("pre=%v: AllowN(4): %+v, %v", pre, d, err)
		}
		clk.Advance(500 * time.Millisecond)
		before, err := e.do(t, "GET", key).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			d, err := l.AllowN(ctx, "k", 0)
			// 4 tokens less 1.5 drained: 2.5 owed, 7.5 left, empty in 834 ms (2.5 / 3 per s, rounded up)
			if err != nil || !d.Allowed || d.Remaining != 7.5 || d.ResetAfter != 834*time.Millisecond {
				t.Fatalf("pre=%v: peek %d: %+v, %v; want Remaining 7.5, ResetAfter 834ms", pre, i, d, err)
			}
			if after, err := e.do(t, "GET", key).ToString(); err != nil || after != before {
				t.Fatalf("pre=%v: peek %d changed %s, %v", pre, i, key, err)
			}
		}
	}
}

// TestAudit96RedisConfigFixedLocalCellsNotConfigError (audit 96; fixed at stop 59, the text
// below says what was wrong): ErrInvalidConfig's
// doc (config.go): "every error New and NewLimiter return for a bad
// configuration; one about a field the core sketch validates (Levels,
// CellsPerLevel, Decay, Lo, Hi, ...) also wraps the core's
// *sketch.ConfigError, for errors.As". DenyCacheCells and FallbackCells
// are the CellsPerLevel of the core sketches NewLimiter builds, and the
// core refuses one above 2^30; NewLimiter flattens that error ("deny
// cache: %v", "local fallback: %v" in newLimiter): it matches
// ErrInvalidConfig but neither errors.As(*sketch.ConfigError) nor
// sketch.ErrInvalidConfig, as the same refusal of LimiterConfig's own
// CellsPerLevel does. No server is contacted (CheckSkip).
func TestAudit96RedisConfigFixedLocalCellsNotConfigError(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, c := range []struct {
		what string
		cfg  LimiterConfig
	}{
		{"CellsPerLevel 2^31", LimiterConfig{CellsPerLevel: 1 << 31}},
		{"DenyCacheCells 2^31", LimiterConfig{DenyCacheCells: 1 << 31}},
		{"FallbackCells 2^31", LimiterConfig{Policy: LocalFallback, FallbackCells: 1 << 31}},
	} {
		cfg := c.cfg
		cfg.Name, cfg.Limit, cfg.ServerCheck = "a96cfg", PerSecond(1, 1), CheckSkip
		l, err := NewLimiter(e.admin, cfg)
		if l != nil || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%s: %v, %v; want ErrInvalidConfig", c.what, l, err)
		}
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: %v: does not wrap the core's *sketch.ConfigError (errors.As %v, sketch.ErrInvalidConfig %v)",
				c.what, err, errors.As(err, &ce), errors.Is(err, sketch.ErrInvalidConfig))
		}
	}
}
