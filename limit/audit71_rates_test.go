package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
)

// audit71Rates are the extreme rates of the brief: tiny (subnormal and
// below 1000/MaxFloat64), huge, infinite, NaN and negative.
var audit71Rates = []float64{
	5e-324, 1e-320, 2.2250738585072014e-308, 1e-307, 5.5e-306, 5.6e-306,
	1e-305, 1e-300, 1e-200, 1e-30, 1e-9,
	1e22, math.Nextafter(1e22, math.Inf(1)), 1e300, math.MaxFloat64,
	math.Inf(1), math.Inf(-1), math.NaN(), -1, math.Copysign(0, -1), 0, -5e-324,
}

// audit71Do runs f with a deadline, reporting a panic or a hang.
func audit71Do(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	select {
	case x := <-done:
		if x != nil {
			t.Errorf("%s panicked: %v; want a typed error or documented behaviour", what, x)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10 s (hang)", what)
	}
}

// audit71Exercise makes decisions on l and checks that nothing panics
// and a denial's RetryAfter is not negative.
func audit71Exercise(t *testing.T, what string, l *Limiter) {
	t.Helper()
	audit71Do(t, what+": decisions", func() {
		now := l.Now()
		for i := 0; i < 3; i++ {
			d := l.DecideN(now, "k", 1)
			if d.RetryAfter < 0 || d.ResetAfter < 0 {
				t.Errorf("%s: decision %d: RetryAfter %v ResetAfter %v, want >= 0", what, i, d.RetryAfter, d.ResetAfter)
			}
		}
		_ = l.PeekN(now, "k", 1)
		_ = l.TokensAt(now, "k")
		r := l.ReserveN(now, "k2", 1)
		r.Cancel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_ = l.WaitN(ctx, "k3", 1)
		cancel()
		_ = l.Stats()
		_ = l.Policies()
	})
}

// TestAudit71ExtremeRatesNew: every extreme rate is either a limiter
// that decides or a *sketch.ConfigError (or MaxDebtError), on every
// engine and burst; never a panic or hang.
func TestAudit71ExtremeRatesNew(t *testing.T) {
	for _, r := range audit71Rates {
		for _, eng := range []Engine{Auto, Buckets, CountMin} {
			for _, b := range []int{1, 1000, 1 << 24} {
				what := fmt.Sprintf("New(%v, %d, engine %v)", r, b, eng)
				var l *Limiter
				var err error
				audit71Do(t, what, func() {
					l, err = New(Limit(r), b, WithEngine(eng), WithSize(2, 64))
				})
				if err != nil {
					var me *MaxDebtError
					if !errors.Is(err, sketch.ErrInvalidConfig) && !errors.As(err, &me) {
						t.Errorf("%s: %v, want a *sketch.ConfigError", what, err)
					}
					if !(r > 0) && !errors.Is(err, sketch.ErrInvalidConfig) {
						t.Errorf("%s: %v, want ErrInvalidConfig for a rate not > 0", what, err)
					}
					continue
				}
				if l == nil {
					t.Errorf("%s: nil limiter and nil error", what)
					continue
				}
				if !(r > 0) || math.IsNaN(r) {
					t.Errorf("%s: accepted a rate that is not > 0", what)
				}
				if r > 1e22 && !math.IsInf(r, 1) && r != math.MaxFloat64 {
					t.Errorf("%s: accepted a rate above 1e22", what)
				}
				audit71Exercise(t, what, l)
			}
		}
	}
}

// TestAudit71ExtremeRatesSetLimitTier: SetLimit and Tier with every
// extreme rate on finite limiters of both engines (and an Inf one).
func TestAudit71ExtremeRatesSetLimitTier(t *testing.T) {
	for _, eng := range []Engine{Buckets, CountMin} {
		for _, md := range []float64{0, 1 << 24} {
			opts := []Option{WithEngine(eng)}
			if eng == Buckets && md > 0 {
				continue
			}
			if md > 0 {
				opts = append(opts, WithMaxDebt(md))
			}
			for _, r := range audit71Rates {
				base, err := New(10, 10, opts...)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				what := fmt.Sprintf("engine %v MaxDebt %v: SetLimit(%v)", eng, md, r)
				var serr error
				audit71Do(t, what, func() { serr = base.SetLimit(Limit(r)) })
				if serr != nil {
					var me *MaxDebtError
					if !errors.Is(serr, sketch.ErrInvalidConfig) && !errors.As(serr, &me) {
						t.Errorf("%s: %v, want a typed error", what, serr)
					}
					if base.Limit() != 10 {
						t.Errorf("%s: failed but Limit is now %v, want 10 (nothing changes)", what, base.Limit())
					}
				} else {
					if !(r > 0) || r > 1e22 {
						t.Errorf("%s: accepted; doc: NaN, not positive, Inf or above 1e22 is a *sketch.ConfigError", what)
					}
					audit71Exercise(t, what, base)
				}
				what = fmt.Sprintf("engine %v MaxDebt %v: Tier(%v)", eng, md, r)
				var tr *Tier
				audit71Do(t, what, func() { tr, err = base.Tier("t", Limit(r), 1) })
				if err != nil {
					var me *MaxDebtError
					if !errors.Is(err, sketch.ErrInvalidConfig) && !errors.As(err, &me) {
						t.Errorf("%s: %v, want a typed error", what, err)
					}
					continue
				}
				if !(r > 0) || r > 1e22 {
					t.Errorf("%s: accepted; doc: NaN, not positive, Inf or above 1e22 is a *sketch.ConfigError", what)
				}
				audit71Do(t, what+": decisions", func() {
					now := tr.Now()
					for i := 0; i < 3; i++ {
						d := tr.DecideN(now, "k", 1)
						if d.RetryAfter < 0 {
							t.Errorf("%s: RetryAfter %v < 0", what, d.RetryAfter)
						}
					}
					_ = tr.PeekN(now, "k", 1)
					tr.ReserveN(now, "k", 1).Cancel()
				})
			}
		}
	}
	inf, err := New(Inf, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range audit71Rates {
		what := fmt.Sprintf("Inf limiter: SetLimit(%v)", r)
		audit71Do(t, what, func() {
			err := inf.SetLimit(Limit(r))
			if (r == math.MaxFloat64 || math.IsInf(r, 1)) != (err == nil) {
				t.Errorf("%s: err %v; doc: SetLimit(Inf) does nothing, any finite limit is a ConfigError", what, err)
			}
			_, terr := inf.Tier("t", Limit(r), 1)
			if terr == nil || !errors.Is(terr, sketch.ErrInvalidConfig) {
				t.Errorf("Inf limiter: Tier(%v): %v, want a ConfigError (any tier of an Inf Limiter)", r, terr)
			}
		})
	}
}

// TestAudit71ExtremeRatesEveryMulti: Every at extreme intervals, and
// Multi over windows built at extreme rates.
func TestAudit71ExtremeRatesEveryMulti(t *testing.T) {
	for _, iv := range []time.Duration{math.MinInt64, -1, 0, 1, time.Millisecond, math.MaxInt64} {
		r := Every(iv)
		if iv <= 0 && r != Inf {
			t.Errorf("Every(%v) = %v, want Inf", iv, r)
		}
		if iv > 0 && !(r > 0 && r <= 1e9) {
			t.Errorf("Every(%v) = %v", iv, r)
		}
		audit71Do(t, fmt.Sprintf("New(Every(%v))", iv), func() {
			l, err := New(r, 5)
			if err != nil {
				t.Errorf("New(Every(%v)=%v, 5): %v", iv, r, err)
				return
			}
			audit71Exercise(t, fmt.Sprintf("Every(%v)", iv), l)
		})
	}
	var ws []*Limiter
	for _, r := range []float64{1e-300, 1e-30, 1e22, math.MaxFloat64, 5.6e-306} {
		for _, eng := range []Engine{Buckets, CountMin} {
			l, err := New(Limit(r), 3, WithEngine(eng), WithSize(2, 64))
			if err != nil {
				continue
			}
			ws = append(ws, l)
		}
	}
	if len(ws) == 0 {
		t.Fatal("no windows")
	}
	audit71Do(t, "Multi over extreme windows", func() {
		m, err := NewMulti(ws...)
		if err != nil {
			t.Logf("NewMulti: %v", err)
			return
		}
		now := ws[0].Now()
		for i := 0; i < 5; i++ {
			d := m.DecideKeys(now, 1, "a")
			if d.RetryAfter < 0 {
				t.Errorf("Multi: RetryAfter %v", d.RetryAfter)
			}
		}
		_ = m.Stats()
		_ = m.Policies()
	})
}
