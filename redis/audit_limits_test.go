package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// TestAuditMeanReadCappedAtHi: with Mean aggregation and a Hi that no
// float32 holds, a key at the clamp must read exactly Hi (never above it:
// "every read caps a score back at Hi"), and TryUpdate(k, 0, Hi) must
// admit it (Hi + 0 <= Hi). The server averages by summing x/L, which can
// land one ulp above Hi.
func TestAuditMeanReadCappedAtHi(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, c := range []struct {
			hi float64
			l  uint32
		}{{7.7, 3}, {0.1, 7}, {100.1, 6}, {1e9 + 1, 6}} {
			name := fmt.Sprintf("auditmean:%v:%d", c.hi, c.l)
			rs := e.sketch(t, Config{Name: name, Levels: c.l, CellsPerLevel: 16, Hi: c.hi, Aggregator: sketch.Mean})
			got, err := rs.UpdateAndQuery(ctx, "k", 2*c.hi)
			if err != nil {
				t.Fatal(err)
			}
			if got > c.hi {
				t.Errorf("Hi %v, L %d: UpdateAndQuery(2 Hi) = %v, above Hi", c.hi, c.l, got)
			}
			if got, err = rs.Query(ctx, "k"); err != nil || got > c.hi {
				t.Errorf("Hi %v, L %d: Query = %v (%v), above Hi", c.hi, c.l, got, err)
			}
			if ok, err := rs.TryUpdate(ctx, "k", 0, c.hi); err != nil || !ok {
				t.Errorf("Hi %v, L %d: TryUpdate(0, Hi) = %v (%v) at the clamp: Hi + 0 <= Hi", c.hi, c.l, ok, err)
			}
		}
	})
}

// TestAuditSlowRateDecision: a Limit whose full bucket takes longer to
// drain than a time.Duration holds (Burst/Rate above 9e9 s) is refused
// with ErrInvalidConfig (it used to answer a negative ResetAfter, or
// fail every call as a malformed reply, degraded); the slowest accepted
// one gives sane Decisions.
func TestAuditSlowRateDecision(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, lim := range []Limit{PerSecond(1e-6, 1e4), PerSecond(1e-9, 1e4)} {
			if _, err := e.newLimiter(t, LimiterConfig{Name: fmt.Sprint("auditslow:", lim.Rate), Limit: lim}); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%+v: NewLimiter error %v, want ErrInvalidConfig", lim, err)
			}
		}
		ctx := context.Background()
		lim := PerSecond(1e-5, 9e4) // drains in 9e9 s, the most accepted
		l := e.limiter(t, LimiterConfig{Name: "auditslow:max", Limit: lim})
		d, err := l.AllowN(ctx, "k", lim.Burst)
		if err != nil || !d.Allowed || d.ResetAfter < 0 {
			t.Errorf("%+v: first AllowN(Burst) = %+v, %v; want admitted, ResetAfter >= 0, no error", lim, d, err)
		}
		d, err = l.AllowN(ctx, "k", 1)
		if err != nil || d.Allowed {
			t.Errorf("%+v: second AllowN = %+v, %v; want denied by the server, no error", lim, d, err)
		}
		if d.ResetAfter < 0 || d.RetryAfter <= 0 {
			t.Errorf("%+v: denied with ResetAfter %v, RetryAfter %v", lim, d.ResetAfter, d.RetryAfter)
		}
	})
}

// TestAuditHugeBurst: a Limit with a finite Burst above the float32 range
// is either refused by NewLimiter (ErrInvalidConfig) or works: AllowN
// with a valid n must not panic.
func TestAuditHugeBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	l, err := e.newLimiter(t, LimiterConfig{Name: "audithuge", Limit: PerSecond(1, 1e39)})
	if err != nil {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("NewLimiter: %v, want ErrInvalidConfig", err)
		}
		return
	}
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("NewLimiter accepted Burst 1e39, then AllowN(1) panicked: %v", r)
		}
	}()
	d, err := l.AllowN(context.Background(), "k", 1)
	if err != nil || !d.Allowed {
		t.Errorf("AllowN = %+v, %v", d, err)
	}
}
