package limit_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// Audit 136: a review of 763255e (checkRateless refuses a Period under
// 1 ms for every limit) and of a Period set with WithPeriod across
// SetLimit, SetBurst, Tier, Multi and a snapshot's restore.

func a136CE(t *testing.T, err error) *sketch.ConfigError {
	t.Helper()
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("%v is not a *sketch.ConfigError matching ErrInvalidConfig", err)
	}
	return ce
}

// TestAudit136PeriodAndMaxDebtErrorsExact: WithPeriod under 1 ms (500µs,
// 1ns, 0, -1s) is refused for Inf, a slow and the fastest rate, with
// the engine left to Auto or CountMin, by one error: Field "Period",
// Value the Duration given, text "limit: Period must be >= 1ms (and >=
// MaxDebt/(rate x (Generations-1)) for a finite rate); got <p>"; a
// Period of 1 ms or more below a finite rate's least is refused naming
// that least; New(Inf, 5, WithPeriod(1ms)) is accepted and its Period()
// is 0 ("0 for Inf"); WithMaxDebt(0) is "limit: MaxDebt must be in
// [burst (5), 2^24]; got 0" for Inf and for 10/s alike.
func TestAudit136PeriodAndMaxDebtErrorsExact(t *testing.T) {
	for _, r := range []limit.Limit{limit.Inf, 0.001, 10, 1e22} {
		for _, p := range []time.Duration{500 * time.Microsecond, 1, 0, -time.Second} {
			for _, extra := range [][]limit.Option{nil, {limit.WithEngine(limit.CountMin)}} {
				_, err := limit.New(r, 5, append([]limit.Option{limit.WithPeriod(p)}, extra...)...)
				ce := a136CE(t, err)
				want := "limit: Period must be >= 1ms (and >= MaxDebt/(rate x (Generations-1)) for a finite rate); got " + p.String()
				if ce.Field != "Period" || ce.Value != any(p) || err.Error() != want {
					t.Errorf("New(%v, 5, WithPeriod(%v)): field %q value %v (%T), %q; want Period, %v, %q", r, p, ce.Field, ce.Value, ce.Value, err, p, want)
				}
			}
		}
	}
	_, err := limit.New(10, 5, limit.WithPeriod(time.Millisecond))
	if ce := a136CE(t, err); ce.Field != "Period" || err.Error() != "limit: Period must be >= MaxDebt/(rate x (Generations-1)) = 1s; got 1ms" {
		t.Errorf("New(10, 5, WithPeriod(1ms)): %q", err)
	}
	l, err := limit.New(limit.Inf, 5, limit.WithPeriod(time.Millisecond))
	if err != nil || l.Period() != 0 {
		t.Errorf("New(Inf, 5, WithPeriod(1ms)): %v, Period %v; want accepted, 0", err, l.Period())
	}
	for _, r := range []limit.Limit{limit.Inf, 10} {
		_, err := limit.New(r, 5, limit.WithMaxDebt(0))
		if ce := a136CE(t, err); ce.Field != "MaxDebt" || err.Error() != "limit: MaxDebt must be in [burst (5), 2^24]; got 0" {
			t.Errorf("New(%v, 5, WithMaxDebt(0)): %q (field %q)", r, err, ce.Field)
		}
	}
}

// TestAudit136PeriodAcrossPolicies: a limiter built WithPeriod(3s) at
// 10/s keeps that Period through SetLimit (to 20/s and to 5/s), SetBurst
// and a Tier (its policies drain the one debt the Period was checked
// for); a Multi of it and a default limiter decides; its snapshot,
// taken after those changes, restores into a fresh New(10, 5,
// WithPeriod(3s)) and is refused by a WithPeriod(4s) one and by a
// default-Period one with an error matching sketch.ErrSnapshotMismatch
// that names both Periods in ms.
func TestAudit136PeriodAcrossPolicies(t *testing.T) {
	mk := func(opts ...limit.Option) *limit.Limiter {
		l, err := limit.New(10, 5, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := mk(limit.WithPeriod(3 * time.Second))
	if err := l.SetLimit(20); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBurst(3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Tier("slow", 5, 4); err != nil {
		t.Fatal(err)
	}
	if l.Period() != 3*time.Second || l.Engine() != limit.CountMin {
		t.Errorf("after SetLimit/SetBurst/Tier: Period %v, engine %v; want 3s, CountMin", l.Period(), l.Engine())
	}
	m, err := limit.NewMulti(l, mk())
	if err != nil {
		t.Fatal(err)
	}
	if !m.Allow("k") {
		t.Error("Multi denied a fresh key")
	}
	var b bytes.Buffer
	if _, err := l.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := mk(limit.WithPeriod(3 * time.Second)).ReadFrom(bytes.NewReader(b.Bytes())); err != nil {
		t.Errorf("restore into the same configuration: %v", err)
	}
	def := mk()
	for _, c := range []struct {
		dst  *limit.Limiter
		want string
	}{
		{mk(limit.WithPeriod(4 * time.Second)), "limit: snapshot Period differs: got 3000ms, the limiter has 4000ms"},
		{def, "limit: snapshot Period differs: got 3000ms, the limiter has " + def.Period().String()},
	} {
		_, err := c.dst.ReadFrom(bytes.NewReader(b.Bytes()))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("restore into Period %v: %v; want ErrSnapshotMismatch", c.dst.Period(), err)
			continue
		}
		if c.dst != def && err.Error() != c.want {
			t.Errorf("restore into Period %v: %q; want %q", c.dst.Period(), err, c.want)
		}
	}
}

// TestAudit136FixedFractionalPeriodSnapshotMisstated (audit 136; fixed at
// stop 64, the text below says what was wrong): WithPeriod takes
// any Duration of at least 1 ms (checkRateless, limit.go:408) and
// Period() reports it as given (1.5ms), but the count-min's rotator
// counts whole ms rounded up (internal/core PeriodMillis: 2 ms), and the
// snapshot header stores l.period.Milliseconds(), truncated
// (persist.go:82: 1 ms). ReadFrom's doc (persist.go:128-133): "the
// limiter must be freshly built by New with the configuration the
// snapshot was taken under ... Period ... must match (an error matching
// sketch.ErrSnapshotMismatch otherwise)".
// Observed at 1e6/s, burst 1 (least Period 1 ms):
//   - WithPeriod(1.5ms)'s snapshot into WithPeriod(2ms) (the same 2 ms
//     rotation) is refused: "limit: snapshot Period differs: got 1ms, the
//     limiter has 2ms": the snapshot's limiter never had 1 ms;
//   - WithPeriod(2ms)'s into WithPeriod(1.5ms): "got 2ms, the limiter has
//     1ms", though that limiter rotates every 2 ms;
//   - WithPeriod(1.999ms)'s into WithPeriod(1.5ms) (Periods that differ)
//     is accepted.
//
// Suggested fix: round a WithPeriod up to whole ms in New (limit.go:351,
// so Period() reports what the rotator runs, and say so in WithPeriod's
// doc, limit.go:214, as doc.go says for the root Rotator), or store
// core.PeriodMillis(l.period) at persist.go:82.
func TestAudit136FixedFractionalPeriodSnapshotMisstated(t *testing.T) {
	mk := func(p time.Duration) *limit.Limiter {
		l, err := limit.New(1e6, 1, limit.WithPeriod(p))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	snap := func(p time.Duration) []byte {
		var b bytes.Buffer
		if _, err := mk(p).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	const us = time.Microsecond
	if _, err := mk(2 * time.Millisecond).ReadFrom(bytes.NewReader(snap(1500 * us))); err != nil {
		t.Errorf("WithPeriod(1.5ms) into WithPeriod(2ms), both rotating every 2 ms: %v", err)
	}
	if _, err := mk(1500 * us).ReadFrom(bytes.NewReader(snap(2 * time.Millisecond))); err != nil {
		t.Errorf("WithPeriod(2ms) into WithPeriod(1.5ms), both rotating every 2 ms: %v", err)
	}
	if l := mk(1500 * us); l.Period() != 2*time.Millisecond {
		t.Errorf("WithPeriod(1.5ms): Period() = %v, but the rotator rotates every 2ms", l.Period())
	}
}
