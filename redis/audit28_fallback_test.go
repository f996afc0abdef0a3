package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a28Down is a server that cannot be reached: every call fails at once
// with a network-like error (no server reply).
type a28Down struct{}

var errA28Down = errors.New("a28: connection refused")

func (a28Down) fcall(context.Context, string, []string, []string) (string, error) {
	return "", errA28Down
}
func (a28Down) fcallStrings(context.Context, string, []string, []string) ([]string, error) {
	return nil, errA28Down
}
func (a28Down) nodes(context.Context) ([]node, error) { return nil, errA28Down }
func (a28Down) concurrent() int                       { return 1 }
func (a28Down) serverError(error) (string, bool)      { return "", false }

// a28FallbackLimiter is a LocalFallback limiter whose server is down
// from the start, on a fake clock.
func a28FallbackLimiter(t testing.TB, lim Limit, n uint32, clk *sketchtest.FakeClock) *Limiter {
	t.Helper()
	l, err := newLimiter(a28Down{}, LimiterConfig{Name: "a28fb", Limit: lim, Policy: LocalFallback, Instances: n,
		FallbackCells: 1 << 12, ServerCheck: CheckSkip, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit28FallbackRetryAfterNeverEarly: Decision.RetryAfter (limiter.go):
// "When denied: the exact wait, rounded up to the ms, after which the
// same request fits if nothing else is admitted meanwhile (never
// early)". For LocalFallback's own denials (server down from the start,
// fake clock), random odd rates, bursts, N and request sizes: a retry at
// exactly t+RetryAfter is admitted. Every trial stays within 2^30 ms of
// the limiter's creation, before the local sketch's first horizon sweep
// (TestAudit28FixedFallbackRetryAfterEarlyAcrossSweep is what happens
// across one). Informational: how often a retry 1 ms before RetryAfter
// is admitted (RetryAfter late, allowed by the float32 rounding).
func TestAudit28FallbackRetryAfterNeverEarly(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 1))
	var early, late, denials int
	var msgs []string
	for trial := range 300 {
		rate := []float64{3, 7, 0.3, 1.7, 13.3, 1000.0 / 7, 0.123456789, 2.5e-3}[r.IntN(8)] * (1 + r.Float64())
		burst := []float64{1, 3, 7, 10, 13.7, 100, 1000}[r.IntN(7)] * (1 + 3*r.Float64())
		inst := uint32(1 + r.IntN(5))
		clk := sketchtest.NewFakeClock()
		clk.Set(1_780_000_000_000 + r.Int64N(1<<20))
		l := a28FallbackLimiter(t, PerSecond(rate, burst), inst, clk)
		horizon := clk.NowMillis() + 1<<30 - 1 // no sweep before
		fbBurst := divDown(burst, inst)        // the fallback's, rounded down (audit 149)
		ctx := context.Background()
		for step := range 60 {
			clk.Advance(time.Duration(r.Int64N(int64(2000*fbBurst/(rate/float64(inst)))+1)) * time.Microsecond)
			if clk.NowMillis() >= horizon {
				break
			}
			var n float64
			switch r.IntN(3) {
			case 0:
				n = float64(1 + r.IntN(max(int(fbBurst), 1)))
			case 1:
				n = fbBurst * r.Float64()
			default:
				n = min(fbBurst, float64(1+r.IntN(3)))
			}
			if n > fbBurst {
				continue
			}
			d, err := l.AllowN(ctx, "k", n)
			if !errors.Is(err, ErrDegraded) {
				t.Fatalf("err %v", err)
			}
			if d.Allowed {
				if d.RetryAfter != -1 {
					t.Fatalf("admitted with RetryAfter %v", d.RetryAfter)
				}
				continue
			}
			if d.RetryAfter <= 0 {
				t.Fatalf("trial %d step %d: fallback denial of n=%v (fb burst %v) with RetryAfter %v", trial, step, n, fbBurst, d.RetryAfter)
			}
			denials++
			t0 := clk.NowMillis()
			ra := d.RetryAfter
			if t0+ra.Milliseconds() >= horizon {
				break
			}
			// 1 ms before: denied (exactness; informational).
			if ra > time.Millisecond {
				clk.Set(t0 + ra.Milliseconds() - 1)
				if d1, _ := l.AllowN(ctx, "k", n); d1.Allowed {
					late++ // admitted early: RetryAfter was late
					// The state changed: restart this trial's key.
					l = a28FallbackLimiter(t, PerSecond(rate, burst), inst, clk)
					continue
				}
			}
			clk.Set(t0 + ra.Milliseconds())
			d2, _ := l.AllowN(ctx, "k", n)
			if !d2.Allowed {
				early++
				if len(msgs) < 5 {
					msgs = append(msgs, fmt.Sprintf("rate %v burst %v N %d n %v: denied at t0 (RetryAfter %v, Remaining %v), denied again at t0+RetryAfter (%+v)",
						rate, burst, inst, n, ra, d.Remaining, d2))
				}
				continue
			}
		}
	}
	t.Logf("%d fallback denials: %d retried at RetryAfter and denied (early), %d admitted 1 ms before (late)", denials, early, late)
	if denials < 1000 {
		t.Fatalf("only %d denials checked", denials)
	}
	if early > 0 {
		t.Errorf("LocalFallback RetryAfter early %d times of %d; e.g.\n%v", early, denials, msgs)
	}
}
