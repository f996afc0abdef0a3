package limit_test

// Audit 54: a systematic sweep of shared/API.md, "limit, meter,
// limit/httplimit": x/time/rate's conventions, the redis_rate-shaped
// Decision, exactness under concurrency, capacity and saturation, through
// the public API only.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The redis_rate Result shape: Allowed, Limit, Remaining, RetryAfter,
// ResetAfter, with their types.
var _ = func(d limit.Decision) (bool, limit.Limit, int, time.Duration, time.Duration) {
	return d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter
}

var a54Engines = []struct {
	name string
	opts []limit.Option
}{
	{"Auto", nil},
	{"Buckets", []limit.Option{limit.WithEngine(limit.Buckets)}},
	{"CountMin", []limit.Option{limit.WithEngine(limit.CountMin)}},
	{"CountMin-colliding", []limit.Option{limit.WithSize(4, 1)}},
}

// TestAudit54LimitExactConcurrentAllow: the exactness API.md promises
// ("N goroutines racing ... admit exactly", "with the same exactness"),
// through the reading: G goroutines racing Allow / AllowN(t, key, 1) on
// one key with burst 1000 and a refill too slow to matter admit exactly
// 1000 on every engine, at GOMAXPROCS 1..8; with every key colliding
// (WithSize(4, 1)) the total admitted over distinct keys is exactly the
// burst as well.
func TestAudit54LimitExactConcurrentAllow(t *testing.T) {
	const burst, g = 1000, 16
	for _, e := range a54Engines {
		t.Run(e.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for _, manyKeys := range []bool{false, true} {
					if manyKeys && e.name != "CountMin-colliding" {
						continue
					}
					fc := limittest.NewFakeClock()
					opts := append([]limit.Option{limit.WithClock(fc)}, e.opts...)
					// 100/s keeps the Buckets engine's MaxDebt within its
					// 61.4 s span; the fake clock never moves, so nothing
					// refills during the race.
					l, err := limit.New(100, burst, opts...)
					if err != nil {
						t.Fatal(err)
					}
					now := fc.Now()
					var admitted atomic.Int64
					var wg sync.WaitGroup
					for i := range g {
						wg.Add(1)
						go func() {
							defer wg.Done()
							key := "k"
							if manyKeys {
								key = fmt.Sprintf("key-%d", i)
							}
							for j := range 2 * burst / g {
								var ok bool
								if j%2 == 0 {
									ok = l.Allow(key)
								} else {
									ok = l.AllowN(now, key, 1)
								}
								if ok {
									admitted.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					if a := admitted.Load(); a != burst {
						t.Errorf("%s manyKeys=%v: admitted %d, want exactly %d", e.name, manyKeys, a, burst)
					}
					if st := l.Stats(); st.Admitted != burst || st.Denied != uint64(2*burst/g*g-burst) {
						t.Errorf("%s: Stats Admitted %d Denied %d, want %d and %d", e.name, st.Admitted, st.Denied, burst, 2*burst/g*g-burst)
					}
				}
			})
		})
	}
}

// TestAudit54LimitDecisionNumbers: the Decision's fields on a known
// bucket (10/s, burst 5) on every engine: admitted decisions have
// RetryAfter 0 and Remaining counting down; the first denial has
// Remaining 0, RetryAfter one token (100 ms), ResetAfter the whole debt
// (500 ms); a retry at RetryAfter is admitted and 1 ms before is not.
func TestAudit54LimitDecisionNumbers(t *testing.T) {
	for _, e := range a54Engines {
		fc := limittest.NewFakeClock()
		l, err := limit.New(10, 5, append([]limit.Option{limit.WithClock(fc)}, e.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		now := fc.Now()
		for i := range 5 {
			d := l.DecideN(now, "k", 1)
			if !d.Allowed || d.RetryAfter != 0 || d.Remaining != 4-i || d.Limit != 10 || d.Burst != 5 {
				t.Errorf("%s request %d: %+v, want Allowed, RetryAfter 0, Remaining %d, Limit 10, Burst 5", e.name, i, d, 4-i)
			}
			if want := time.Duration(i+1) * 100 * time.Millisecond; d.ResetAfter != want {
				t.Errorf("%s request %d: ResetAfter %v, want %v", e.name, i, d.ResetAfter, want)
			}
		}
		d := l.DecideN(now, "k", 1)
		if d.Allowed || d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond || d.ResetAfter != 500*time.Millisecond || d.Never {
			t.Errorf("%s denial: %+v, want Remaining 0, RetryAfter 100ms, ResetAfter 500ms", e.name, d)
		}
		// (a t after the clock's reading counts as that reading: move the
		// clock.)
		fc.Advance(99 * time.Millisecond)
		if l.AllowN(fc.Now(), "k", 1) {
			t.Errorf("%s: admitted 1 ms before RetryAfter", e.name)
		}
		fc.Advance(time.Millisecond)
		if !l.AllowN(fc.Now(), "k", 1) {
			t.Errorf("%s: denied at RetryAfter", e.name)
		}
		if d := l.DecideN(fc.Now(), "k", 6); d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration {
			t.Errorf("%s n > burst: %+v, want Never and RetryAfter InfDuration", e.name, d)
		}
	}
}

// TestAudit54LimitXRateConventions: Every's conversion (Every(0) is Inf,
// as x/time/rate's), Inf admits anything, n above the burst is never
// admitted and a ReserveN of it is not OK, WaitN's errors before waiting
// match with errors.Is / errors.As (ErrAboveBurst, a deadline it cannot
// meet as context.DeadlineExceeded), and New's errors are
// *sketch.ConfigError matching sketch.ErrInvalidConfig.
func TestAudit54LimitXRateConventions(t *testing.T) {
	if limit.Every(0) != limit.Inf || limit.Every(-time.Second) != limit.Inf {
		t.Error("Every(0) / Every(<0) is not Inf")
	}
	if got := limit.Every(250 * time.Millisecond); got != 4 {
		t.Errorf("Every(250ms) = %v, want 4", got)
	}
	fc := limittest.NewFakeClock()
	inf, err := limit.New(limit.Inf, 1, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if !inf.AllowN(fc.Now(), "k", 1_000_000) {
			t.Fatal("Inf denied")
		}
	}
	l, err := limit.New(10, 5, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	if l.AllowN(fc.Now(), "k", 6) {
		t.Error("AllowN(n=6) with burst 5 admitted")
	}
	if r := l.ReserveN(fc.Now(), "k", 6); r.OK() {
		t.Error("ReserveN(n=6) with burst 5 OK")
	}
	if tok := l.Tokens("k"); tok != 5 {
		t.Errorf("Tokens after refused n=6 = %v, want 5 (nothing debited)", tok)
	}
	err = l.WaitN(context.Background(), "k", 6)
	var we *limit.WaitError
	if !errors.Is(err, limit.ErrAboveBurst) || !errors.As(err, &we) || we.N != 6 || we.Burst != 5 {
		t.Errorf("WaitN(n=6): %v, want a *WaitError matching ErrAboveBurst with N 6, Burst 5", err)
	}
	// A deadline it cannot meet: 5 tokens debited, 1 more needs 100 ms,
	// the context allows 10 ms. The deadline is read on the limiter's
	// clock (WaitN's doc). The fake clock is set an hour ahead of real
	// time, so the context itself does not end during the call (under
	// qemu, 10 ms of real time passed before WaitN read it, and it
	// returned the context's own error: stop 61's make test).
	fc.SetTime(time.Now().Add(time.Hour))
	if !l.AllowN(fc.Now(), "k", 5) {
		t.Fatal("burst denied")
	}
	ctx, cancel := context.WithDeadline(context.Background(), fc.Now().Add(10*time.Millisecond))
	defer cancel()
	err = l.WaitN(ctx, "k", 1)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) {
		t.Errorf("WaitN past the deadline: %v, want a *WaitError matching context.DeadlineExceeded", err)
	}
	if tok := l.Tokens("k"); tok != 0 {
		t.Errorf("Tokens after the refused WaitN = %v, want 0 (nothing debited)", tok)
	}
	for _, tc := range []struct {
		lim   limit.Limit
		burst int
	}{{limit.Limit(math.NaN()), 1}, {0, 1}, {-1, 1}, {10, 0}, {10, -1}} {
		_, err := limit.New(tc.lim, tc.burst)
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("New(%v, %d): %v, want a *sketch.ConfigError", tc.lim, tc.burst, err)
		}
	}
}

// TestAudit54LimitCapacityRoundTrip: "a limiter states how many keys at
// full debt its memory holds at a given innocent-denial rate, sizes
// itself from that (an option), and reports its saturation": a limiter
// sized WithCapacity(keys, deny) states Capacity(deny) >= keys, and its
// Saturation is 0 when empty, grows as keys reach full debt and, at the
// stated capacity, stays near the target (at most 4x deny).
func TestAudit54LimitCapacityRoundTrip(t *testing.T) {
	const keys, deny = 20_000, 0.01
	for _, e := range []struct {
		name string
		eng  limit.Engine
	}{{"Buckets", limit.Buckets}, {"CountMin", limit.CountMin}} {
		fc := limittest.NewFakeClock()
		l, err := limit.New(1, 10, limit.WithClock(fc), limit.WithEngine(e.eng), limit.WithCapacity(keys, deny))
		if err != nil {
			t.Fatal(err)
		}
		if c := l.Capacity(deny); c < keys {
			t.Errorf("%s: WithCapacity(%d, %v) then Capacity(%v) = %d, want >= %d", e.name, keys, deny, deny, c, keys)
		}
		if s := l.Stats().Saturation; s != 0 {
			t.Errorf("%s: empty Saturation %v, want 0", e.name, s)
		}
		now := fc.Now()
		for i := range keys {
			l.AllowN(now, fmt.Sprint("user-", i), 10)
		}
		s := l.Stats().Saturation
		if !(s > 0) || s > 4*deny {
			t.Errorf("%s: Saturation at the stated capacity %v, want in (0, %v]", e.name, s, 4*deny)
		}
		// The measured innocent-denial rate at capacity (PeekN: the probes
		// must not add keys of their own).
		denied := 0
		const probes = 20_000
		for i := range probes {
			if !l.PeekN(now, fmt.Sprint("fresh-", i), 1).Allowed {
				denied++
			}
		}
		if rate := float64(denied) / probes; rate > 2*deny {
			t.Errorf("%s: %d of %d fresh keys denied at the stated capacity (%.4f), want <= ~%v", e.name, denied, probes, rate, deny)
		}
	}
}

// TestAudit54LimitDefaultsNoAllocs: "Allow does not allocate" (package
// doc), on a limiter built the way a user first writes it: defaults
// only, the real clock, the default (Auto) engine, many distinct keys;
// (A Multi's admission allocates one receipt slice per count-min window,
// internal/core/rotator_at.go "It allocates the Reservation's receipts";
// no doc promises Multi allocates nothing, so it is not asserted here.)
func TestAudit54LimitDefaultsNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	l, err := limit.New(100, 10)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := limit.New(limit.Every(time.Minute), 1000) // CountMin under Auto
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("198.51.100.", i)
	}
	i := 0
	for name, f := range map[string]func(){
		"Allow":     func() { l.Allow(keys[i%len(keys)]); i++ },
		"Decide":    func() { l.Decide(keys[i%len(keys)]); i++ },
		"Peek":      func() { l.Peek(keys[i%len(keys)]); i++ },
		"Allow(cm)": func() { l2.Allow(keys[i%len(keys)]); i++ },
	} {
		if a := testing.AllocsPerRun(2000, f); a != 0 {
			t.Errorf("%s (defaults, engines %v/%v): %v allocs/op, want 0", name, l.Engine(), l2.Engine(), a)
		}
	}
}
