package limit_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// Audit 139: a review of stop 64's rounding of a WithPeriod up to whole
// ms in New (limit.go:358-361).

// TestAudit139PeriodRoundingEdges: at 10/s, burst 5 (least Period 1s),
// WithPeriod(1s−1ns) is refused (the check runs on the Period given,
// and it is shorter than the least), 1s is kept, 1s+1ns and 1.0005s are
// 1001ms; at 1e6/s, burst 1 (least 1 ms), 1ms is 1ms, 1ms+1ns and 1.5ms
// are 2ms; at 0.001/s WithPeriod(MaxInt64) (not a whole ms) runs, and
// reports, the largest whole-ms Duration, and a whole-ms Period near it
// is kept; for Inf, WithPeriod(1.5ms) is accepted and Period() is 0.
func TestAudit139PeriodRoundingEdges(t *testing.T) {
	largest := time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond
	for _, c := range []struct {
		rate    limit.Limit
		burst   int
		p, want time.Duration // want -1: refused
	}{
		{10, 5, time.Second - 1, -1},
		{10, 5, time.Second, time.Second},
		{10, 5, time.Second + 1, 1001 * time.Millisecond},
		{10, 5, 1000500 * time.Microsecond, 1001 * time.Millisecond},
		{1e6, 1, time.Millisecond, time.Millisecond},
		{1e6, 1, time.Millisecond + 1, 2 * time.Millisecond},
		{1e6, 1, 1500 * time.Microsecond, 2 * time.Millisecond},
		{1e6, 1, 2*time.Millisecond - 1, 2 * time.Millisecond},
		{0.001, 1, math.MaxInt64, largest},
		{0.001, 1, largest, largest},
		{0.001, 1, largest - time.Millisecond + 1, largest},
		{limit.Inf, 1, 1500 * time.Microsecond, 0},
	} {
		l, err := limit.New(c.rate, c.burst, limit.WithPeriod(c.p))
		if c.want < 0 {
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Period" {
				t.Errorf("New(%v, %d, WithPeriod(%v)): %v; want a Period ConfigError", c.rate, c.burst, c.p, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%v, %d, WithPeriod(%v)): %v", c.rate, c.burst, c.p, err)
			continue
		}
		if got := l.Period(); got != c.want {
			t.Errorf("New(%v, %d, WithPeriod(%v)).Period() = %v; want %v", c.rate, c.burst, c.p, got, c.want)
		}
		if c.rate != limit.Inf && !l.Allow("k") {
			t.Errorf("New(%v, %d, WithPeriod(%v)) denied a fresh key", c.rate, c.burst, c.p)
		}
	}
}

// TestAudit139FractionalPeriodSnapshotsAndPolicies: a limiter built
// WithPeriod(1000.5ms) at 10/s keeps Period 1001ms through SetLimit (to
// 20/s and 5/s), SetBurst and Tier; its snapshot restores into a fresh
// WithPeriod(1001ms) and a WithPeriod(1000.001ms) limiter (both run
// 1001 ms), and is refused with ErrSnapshotMismatch by WithPeriod(1s)
// and WithPeriod(1002ms); one built at the largest Period round-trips
// into WithPeriod(MaxInt64).
func TestAudit139FractionalPeriodSnapshotsAndPolicies(t *testing.T) {
	mk := func(r limit.Limit, p time.Duration) *limit.Limiter {
		l, err := limit.New(r, 5, limit.WithPeriod(p))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := mk(10, 1000500*time.Microsecond)
	for _, f := range []func() error{
		func() error { return l.SetLimit(20) },
		func() error { return l.SetLimit(5) },
		func() error { return l.SetBurst(3) },
		func() error { _, err := l.Tier("slow", 5, 4); return err },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if l.Period() != 1001*time.Millisecond {
			t.Fatalf("Period %v after a policy change; want 1001ms", l.Period())
		}
	}
	l.Allow("a")
	var b bytes.Buffer
	if _, err := l.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p  time.Duration
		ok bool
	}{
		{1001 * time.Millisecond, true},
		{1000001 * time.Microsecond, true},
		{time.Second, false},
		{1002 * time.Millisecond, false},
	} {
		_, err := mk(10, c.p).ReadFrom(bytes.NewReader(b.Bytes()))
		if c.ok && err != nil {
			t.Errorf("restore into WithPeriod(%v): %v", c.p, err)
		}
		if !c.ok && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("restore into WithPeriod(%v): %v; want ErrSnapshotMismatch", c.p, err)
		}
	}
	big := mk(0.001, math.MaxInt64-time.Millisecond)
	b.Reset()
	if _, err := big.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := mk(0.001, math.MaxInt64).ReadFrom(bytes.NewReader(b.Bytes())); err != nil {
		t.Errorf("restore of a largest-Period snapshot: %v", err)
	}
}
