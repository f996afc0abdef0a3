package limit_test

// Contract conformance (audit11): package limit as shared/API.md ("limit,
// meter, limit/httplimit") and issues 15, 24, 26 and 28 state it, in
// golang.org/x/time/rate's conventions. Shapes that do not compile are in
// audit11_api_contract_limit_test.go behind the audit11contract tag.

import (
	"bytes"
	"context"
	"encoding"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

var (
	_ func(limit.Limit, int, ...limit.Option) (*limit.Limiter, error) = limit.New
	_ func(time.Duration) limit.Limit                                 = limit.Every
	_ limit.Limit                                                     = limit.Inf
	_ func(...*limit.Limiter) (*limit.Multi, error)                   = limit.NewMulti
	_ func(string) (limit.Limit, error)                               = limit.ParseLimit
	_ func(int, float64) limit.Option                                 = limit.WithCapacity
	_ func(bool) limit.Option                                         = limit.WithStrict
	_ func(float64) limit.Option                                      = limit.WithRejectCost
	_ func(limit.Engine) limit.Option                                 = limit.WithEngine
	_ func(bool) limit.Option                                         = limit.WithConservativeUpdate

	_ encoding.TextMarshaler   = limit.Limit(1)
	_ encoding.TextUnmarshaler = new(limit.Limit)

	_ snapshot.Source      = (*limit.Limiter)(nil)
	_ snapshot.Destination = (*limit.Limiter)(nil)
)

// TestAudit11APILimitSurface: the x/time/rate-shaped methods with the
// stated signatures and argument order.
func TestAudit11APILimitSurface(t *testing.T) {
	fc := limittest.NewFakeClock()
	l, err := limit.New(limit.Every(100*time.Millisecond), 5, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	var (
		_ func(string) bool                                   = l.Allow
		_ func(time.Time, string, int) bool                   = l.AllowN
		_ func(time.Time, string, int) *limit.Reservation     = l.ReserveN
		_ func(context.Context, string, int) error            = l.WaitN
		_ func(string) limit.Decision                         = l.Peek
		_ func(limit.Limit) error                             = l.SetLimit
		_ func(int) error                                     = l.SetBurst
		_ func() limit.Stats                                  = l.Stats
		_ func(string, limit.Limit, int) (*limit.Tier, error) = l.Tier
		_ func(float64) int                                   = l.Capacity
	)
	if l.Limit() != 10 || l.Burst() != 5 {
		t.Fatalf("Every(100ms), burst 5: Limit %v Burst %d", l.Limit(), l.Burst())
	}
	now := fc.Now()
	// AllowN(t, key, n): n=5 fits the burst, a further 1 does not.
	if !l.AllowN(now, "k", 5) {
		t.Fatal("AllowN(now, k, 5) with burst 5 denied")
	}
	if l.AllowN(now, "k", 1) {
		t.Fatal("AllowN(now, k, 1) after the burst admitted")
	}
	// ReserveN(t, key, n): OK, Delay, DelayFrom, Cancel.
	r := l.ReserveN(now, "k", 2)
	if !r.OK() {
		t.Fatal("ReserveN(now, k, 2) not OK")
	}
	if d := r.DelayFrom(now); d != 200*time.Millisecond {
		t.Errorf("DelayFrom(now) = %v, want 200ms (2 tokens at 10/s)", d)
	}
	if d := r.Delay(); d != 200*time.Millisecond {
		t.Errorf("Delay() on the fake clock = %v, want 200ms", d)
	}
	r.Cancel()
	if r := l.ReserveN(now, "k", 6); r.OK() {
		t.Error("ReserveN with n > burst OK")
	}
}

// TestAudit11APILimitDecision: "a Decision in the shape of redis_rate's
// Result (Allowed, Limit, Remaining, RetryAfter, ResetAfter)", a
// never-retry signal when n > burst, and RetryAfter exact: a retry at
// exactly t+RetryAfter is admitted, 1 ms earlier is not.
func TestAudit11APILimitDecision(t *testing.T) {
	fc := limittest.NewFakeClock()
	l, err := limit.New(limit.Every(300*time.Millisecond), 3, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	t0 := fc.Now()
	d := l.DecideN(t0, "k", 2)
	var (
		allowed   bool          = d.Allowed
		lim       limit.Limit   = d.Limit
		remaining int           = d.Remaining
		retry     time.Duration = d.RetryAfter
		reset     time.Duration = d.ResetAfter
		never     bool          = d.Never
	)
	if !allowed || remaining != 1 || retry != 0 || never || reset != 600*time.Millisecond || lim != l.Limit() {
		t.Errorf("first DecideN(2 of 3) = %+v", d)
	}
	d = l.DecideN(t0, "k", 3)
	if d.Allowed || d.RetryAfter != 600*time.Millisecond {
		t.Fatalf("DecideN(3) with 1 left = %+v, want denied, RetryAfter 600ms", d)
	}
	// A t ahead of the clock counts as the clock's reading (the documented
	// deviation from x/time/rate): move the clock, then ask.
	fc.Advance(d.RetryAfter - time.Millisecond)
	if l.AllowN(fc.Now(), "k", 3) {
		t.Error("admitted 1 ms before RetryAfter")
	}
	fc.Advance(time.Millisecond)
	if !l.AllowN(fc.Now(), "k", 3) {
		t.Error("denied at exactly RetryAfter")
	}
	if d := l.DecideN(fc.Now(), "k", 4); !d.Never || d.Allowed {
		t.Errorf("n > burst: %+v, want Never", d)
	}
}

// TestAudit11APILimitErrors (issue 24): typed errors, nil options refused,
// WaitN's failures told apart, the past-deadline one matching
// context.DeadlineExceeded, waiting driven by the injected clock.
func TestAudit11APILimitErrors(t *testing.T) {
	if _, err := limit.New(1, 1, nil); err == nil || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("limit.New(1, 1, nil) = %v, want a *sketch.ConfigError", err)
	}
	if _, err := limit.New(1, 0); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("burst 0: %v, want ErrInvalidConfig", err)
	}
	fc := limittest.NewFakeClock()
	l, err := limit.New(10, 2, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	err = l.WaitN(context.Background(), "k", 3)
	var we *limit.WaitError
	if !errors.Is(err, limit.ErrAboveBurst) || !errors.As(err, &we) {
		t.Errorf("WaitN above burst: %v", err)
	}
	// The deadline rule on the real clock (a fake clock's reading is not
	// comparable with a context's real deadline).
	rl, err := limit.New(10, 2)
	if err != nil {
		t.Fatal(err)
	}
	rl.AllowN(time.Now(), "k", 2)
	// 2 tokens need 200 ms; 150 ms of deadline leaves WaitN 150 ms of
	// real time to read it (an emulator can take tens of ms a line).
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	err = rl.WaitN(ctx, "k", 2)
	if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitN past the deadline: %v", err)
	}
	l.AllowN(fc.Now(), "k", 2)
	// A fake-clock wait returns once the clock is advanced, without real
	// sleeping.
	done := make(chan error, 1)
	go func() { done <- l.WaitN(context.Background(), "k", 1) }()
	fc.BlockUntilTimers(1)
	fc.Advance(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WaitN on the fake clock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitN did not return after the fake clock advanced")
	}
}

// TestAudit11APILimitParse (issue 28): ParseLimit("100/s"), "1000/h",
// "5/m", "10/250ms"; Limit as TextMarshaler/TextUnmarshaler.
func TestAudit11APILimitParse(t *testing.T) {
	for s, want := range map[string]limit.Limit{
		"100/s":    100,
		"1000/h":   limit.Limit(1000.0 / 3600),
		"5/m":      limit.Limit(5.0 / 60),
		"10/250ms": 40,
	} {
		got, err := limit.ParseLimit(s)
		if err != nil || float64(got) < float64(want)*(1-1e-12) || float64(got) > float64(want)*(1+1e-12) {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v", s, got, err, want)
		}
		var u limit.Limit
		if err := u.UnmarshalText([]byte(s)); err != nil || u != got {
			t.Errorf("UnmarshalText(%q) = %v, %v", s, u, err)
		}
		b, err := got.MarshalText()
		var back limit.Limit
		if err != nil || back.UnmarshalText(b) != nil || back != got {
			t.Errorf("MarshalText(%v) = %q, %v does not round-trip (%v)", got, b, err, back)
		}
	}
	if _, err := limit.ParseLimit("ten per second"); err == nil {
		t.Error("ParseLimit accepted garbage")
	}
}

// TestAudit11APILimitStatsPersist (issue 28): Stats counts admitted and
// denied; WriteTo/ReadFrom carry the debts across a restart; the snapshot
// package's Saver and Load work with a Limiter.
func TestAudit11APILimitStatsPersist(t *testing.T) {
	testsize.Serial(t)
	fc := limittest.NewFakeClock()
	l, err := limit.New(1, 3, limit.WithClock(fc), limit.WithSeed(11))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Allow("k")
	}
	st := l.Stats()
	if st.Admitted != 3 || st.Denied != 2 {
		t.Errorf("Stats Admitted %d Denied %d, want 3 and 2", st.Admitted, st.Denied)
	}
	var _ float64 = st.Saturation
	var _ uint64 = st.Rotations
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	l2, err := limit.New(1, 3, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	if l2.Allow("k") {
		t.Error("restored limiter admitted a key at full debt")
	}
	path := filepath.Join(t.TempDir(), "lim.snap")
	if err := snapshot.WriteFile(path, l); err != nil {
		t.Fatal(err)
	}
	l3, err := limit.New(1, 3, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(path, l3); err != nil {
		t.Fatal(err)
	}
	if l3.Allow("k") {
		t.Error("limiter loaded from a snapshot file admitted a key at full debt")
	}
}

// TestAudit11APILimitCapacity (issue 26): WithCapacity(keys, rate),
// Suggest, WithEngine(CountMin).
func TestAudit11APILimitCapacity(t *testing.T) {
	sz, err := limit.Suggest(100_000, 0.01)
	if err != nil || sz.Keys != 100_000 || sz.Deny != 0.01 {
		t.Errorf("Suggest(100000, 0.01) = %+v, %v", sz, err)
	}
	small, err := limit.New(10, 20, limit.WithCapacity(10_000, 0.01))
	if err != nil {
		t.Fatal(err)
	}
	big, err := limit.New(10, 20, limit.WithCapacity(1_000_000, 0.01))
	if err != nil {
		t.Fatal(err)
	}
	if small.Stats().Bytes >= big.Stats().Bytes {
		t.Errorf("WithCapacity(10k) holds %d bytes, WithCapacity(1M) %d: not sized by keys", small.Stats().Bytes, big.Stats().Bytes)
	}
	cm, err := limit.New(10, 20, limit.WithEngine(limit.CountMin))
	if err != nil || cm.Engine() != limit.CountMin {
		t.Errorf("WithEngine(CountMin): %v, %v", cm.Engine(), err)
	}
}

// TestAudit11APILimitMulti (issue 15): several windows in one call,
// all-or-nothing: a denial by any window debits none.
func TestAudit11APILimitMulti(t *testing.T) {
	fc := limittest.NewFakeClock()
	fast, err := limit.New(10, 5, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	slow, err := limit.New(limit.Every(time.Minute), 2, limit.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(fast, slow)
	if err != nil {
		t.Fatal(err)
	}
	now := fc.Now()
	if !m.AllowN(now, "k", 2) {
		t.Fatal("Multi denied 2 of (5, 2)")
	}
	if m.AllowN(now, "k", 1) {
		t.Fatal("Multi admitted past the slow window")
	}
	if tok := fast.TokensAt(now, "k"); tok != 3 {
		t.Errorf("fast window holds %v tokens after a denied Multi, want 3 (nothing debited)", tok)
	}
}
