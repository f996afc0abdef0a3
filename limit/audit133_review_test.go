package limit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// Audit 133: a review of stop 64's limit changes (WithMaxDebt(0) and
// WithPeriod(0) refused, ParseLimit's floor, +Inf's text).

// a133Field returns the Field of err's *sketch.ConfigError ("" if none).
func a133Field(err error) string {
	var ce *sketch.ConfigError
	if errors.As(err, &ce) {
		return ce.Field
	}
	return ""
}

// TestAudit133FixedPeriodBelowMsRefusedOnlyOnceFinite (audit 133; fixed at stop 64, the text
// below says what was wrong): a Period under
// 1 ms (0 since stop 64, or negative) is refused at every finite rate
// (New's minimum, periodFor, is at least 1 ms), so its refusal does not
// depend on the rate, but New(Inf, ...) accepts it.
//
// limit.go, New: "What does not depend on the rate is refused alike for
// Inf and for a finite limit, so that a configuration does not fail only
// once its rate is made finite (audit 42)"; docs/migrating.md (audits
// 49-51): the rate-independent options are checked "once, before the
// rate, for every limit"; WithPeriod: "New refuses a Period shorter than
// MaxDebt / (rate x (Generations-1))".
//
// Observed: New(Inf, 5, WithPeriod(0)) and WithPeriod(-time.Second)
// return a limiter, nil; the same configuration with the flag's rate
// changed from "inf" to "10/s" fails at start-up with a ConfigError
// naming Period. Before stop 64 WithPeriod(0) was accepted at every
// rate (as the default); the refusal now added is rate-independent but
// was put only on the finite path (limit.go:353), not in checkRateless
// (limit.go:402), where WithMaxDebt(0)'s is.
//
// Suggested fix: in checkRateless refuse `o.periodSet && o.period <
// time.Millisecond` (below every finite rate's minimum), naming Period.
func TestAudit133FixedPeriodBelowMsRefusedOnlyOnceFinite(t *testing.T) {
	for _, p := range []time.Duration{0, -time.Second, 500 * time.Microsecond} {
		_, ferr := limit.New(10, 5, limit.WithPeriod(p))
		if a133Field(ferr) != "Period" {
			t.Fatalf("New(10, 5, WithPeriod(%v)) = %v; want a ConfigError naming Period", p, ferr)
		}
		// Refused at every finite rate, the fastest included.
		if _, err := limit.New(1e22, 1, limit.WithPeriod(p)); err == nil {
			t.Fatalf("New(1e22, 1, WithPeriod(%v)) accepted", p)
		}
		if _, ierr := limit.New(limit.Inf, 5, limit.WithPeriod(p)); ierr == nil {
			t.Errorf("New(Inf, 5, WithPeriod(%v)) accepted; New(10, 5, WithPeriod(%v)) refuses it: %v", p, p, ferr)
		}
	}
}

// TestAudit133ZeroOptionsRefusedTyped: WithMaxDebt(0) (and -0) and
// WithPeriod(0) are *sketch.ConfigErrors naming MaxDebt and Period (with
// Buckets: Engine), prefixed "limit: ", for a finite limit; WithMaxDebt(0)
// for Inf too (checkRateless); MustNew panics with the same text.
func TestAudit133ZeroOptionsRefusedTyped(t *testing.T) {
	for _, c := range []struct {
		name  string
		lim   limit.Limit
		opts  []limit.Option
		field string
	}{
		{"MaxDebt 0", 10, []limit.Option{limit.WithMaxDebt(0)}, "MaxDebt"},
		{"MaxDebt -0", 10, []limit.Option{limit.WithMaxDebt(math.Copysign(0, -1))}, "MaxDebt"},
		{"MaxDebt 0 CountMin", 10, []limit.Option{limit.WithMaxDebt(0), limit.WithEngine(limit.CountMin)}, "MaxDebt"},
		{"MaxDebt 0 Buckets", 10, []limit.Option{limit.WithMaxDebt(0), limit.WithEngine(limit.Buckets)}, "MaxDebt"},
		{"MaxDebt 0 Inf", limit.Inf, []limit.Option{limit.WithMaxDebt(0)}, "MaxDebt"},
		{"MaxDebt 0 +Inf", limit.Limit(math.Inf(1)), []limit.Option{limit.WithMaxDebt(0)}, "MaxDebt"},
		{"Period 0", 10, []limit.Option{limit.WithPeriod(0)}, "Period"},
		{"Period 0 CountMin", 10, []limit.Option{limit.WithPeriod(0), limit.WithEngine(limit.CountMin)}, "Period"},
		{"Period 0 Buckets", 10, []limit.Option{limit.WithPeriod(0), limit.WithEngine(limit.Buckets)}, "Engine"},
		{"Period 0 Buckets Inf", limit.Inf, []limit.Option{limit.WithPeriod(0), limit.WithEngine(limit.Buckets)}, "Engine"},
	} {
		l, err := limit.New(c.lim, 5, c.opts...)
		if l != nil || a133Field(err) != c.field || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "limit: ") {
			t.Errorf("%s: New = %v, %v; want a ConfigError naming %s", c.name, l != nil, err, c.field)
			continue
		}
		var msg any
		func() {
			defer func() { msg = recover() }()
			limit.MustNew(c.lim, 5, c.opts...)
		}()
		if e, ok := msg.(error); !ok || e.Error() != err.Error() {
			t.Errorf("%s: MustNew panicked with %v; want New's error", c.name, msg)
		}
	}
	// The messages say what is allowed.
	_, err := limit.New(10, 5, limit.WithMaxDebt(0))
	if !strings.Contains(err.Error(), "[burst (5), 2^24]") {
		t.Errorf("WithMaxDebt(0): %v", err)
	}
	_, err = limit.New(10, 5, limit.WithPeriod(0))
	if !strings.Contains(err.Error(), "Period must be >=") {
		t.Errorf("WithPeriod(0): %v", err)
	}
}

// TestAudit133DefaultsAndExplicitEquals: every path that builds with the
// defaults still does (New with no option, with RejectCost, on each
// engine; Tier, SetLimit, SetBurst, NewMulti, a snapshot round trip,
// MaxDebtError.Need fed back to WithMaxDebt); an explicit WithMaxDebt of
// the default MaxDebt builds the same limiter (engine, Exact, Period),
// and an explicit WithPeriod of the default Period the same Period;
// the least values (MaxDebt = burst, Period = its minimum) are taken.
func TestAudit133DefaultsAndExplicitEquals(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Auto, limit.Buckets, limit.CountMin} {
		for _, rc := range []float64{0, 3} {
			l, err := limit.New(10, 5, limit.WithEngine(eng), limit.WithRejectCost(rc))
			if err != nil {
				t.Fatalf("%v rc %v: %v", eng, rc, err)
			}
			if want := math.Max(10, 5+rc); l.MaxDebt() != want {
				t.Errorf("%v rc %v: MaxDebt %v, want %v", eng, rc, l.MaxDebt(), want)
			}
			l2, err := limit.New(10, 5, limit.WithEngine(eng), limit.WithRejectCost(rc), limit.WithMaxDebt(l.MaxDebt()))
			if err != nil || l2.Engine() != l.Engine() || l2.Exact() != l.Exact() || l2.Period() != l.Period() || l2.MaxDebt() != l.MaxDebt() {
				t.Errorf("%v rc %v: explicit default MaxDebt: %v (engine %v exact %v period %v), default (engine %v exact %v period %v)",
					eng, rc, err, l2.Engine(), l2.Exact(), l2.Period(), l.Engine(), l.Exact(), l.Period())
			}
			if l.Engine() == limit.CountMin {
				if l.Period() <= 0 {
					t.Errorf("%v: default Period %v", eng, l.Period())
				}
				l3, err := limit.New(10, 5, limit.WithEngine(eng), limit.WithRejectCost(rc), limit.WithPeriod(l.Period()))
				if err != nil || l3.Period() != l.Period() {
					t.Errorf("%v rc %v: WithPeriod(default %v): %v, %v", eng, rc, l.Period(), err, l3)
				}
			}
			if _, err := limit.New(10, 5, limit.WithEngine(eng), limit.WithMaxDebt(5+rc), limit.WithRejectCost(rc)); err != nil {
				t.Errorf("%v: MaxDebt = burst + RejectCost refused: %v", eng, err)
			}
			if _, err := l.Tier("half", 5, 5); err != nil {
				t.Errorf("%v: Tier(5/s, 5) on a default limiter: %v", eng, err)
			}
			if err := l.SetLimit(20); err != nil {
				t.Errorf("%v: SetLimit(20): %v", eng, err)
			}
			if err := l.SetBurst(3); err != nil {
				t.Errorf("%v: SetBurst(3): %v", eng, err)
			}
		}
	}
	// The least Period: 1 ms below it is refused, it is taken.
	cm, err := limit.New(10, 5, limit.WithEngine(limit.CountMin), limit.WithGenerations(3))
	if err != nil {
		t.Fatal(err)
	}
	least := time.Duration(float64(cm.MaxDebt())/(10*2)*1000) * time.Millisecond
	if _, err := limit.New(10, 5, limit.WithGenerations(3), limit.WithPeriod(least)); err != nil {
		t.Errorf("WithPeriod(its minimum %v): %v", least, err)
	}
	if _, err := limit.New(10, 5, limit.WithGenerations(3), limit.WithPeriod(least-time.Millisecond)); a133Field(err) != "Period" {
		t.Errorf("WithPeriod(%v, below the minimum): %v", least-time.Millisecond, err)
	}
	// A policy the default MaxDebt cannot hold: Need fed back is taken.
	def := limit.MustNew(10, 5)
	_, err = def.Tier("slow", 1, 5)
	var me *limit.MaxDebtError
	if !errors.As(err, &me) {
		t.Fatalf("Tier(1/s, 5) on New(10, 5): %v; want a *MaxDebtError", err)
	}
	wide, err := limit.New(10, 5, limit.WithMaxDebt(me.Need))
	if err != nil {
		t.Fatalf("WithMaxDebt(Need %v): %v", me.Need, err)
	}
	if _, err := wide.Tier("slow", 1, 5); err != nil {
		t.Errorf("Tier(1/s, 5) WithMaxDebt(Need): %v", err)
	}
	// NewMulti of default windows, and a snapshot round trip of each engine.
	m, err := limit.NewMulti(limit.MustNew(10, 5, limit.WithName("s")), limit.MustNew(100, 50, limit.WithName("m")))
	if err != nil || !m.Allow("k") {
		t.Fatalf("NewMulti of defaults: %v", err)
	}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		mk := func() *limit.Limiter {
			if eng == limit.Buckets {
				return limit.MustNew(10, 5, limit.WithEngine(eng), limit.WithCapacity(16, 0.01), limit.WithSeed(1))
			}
			return limit.MustNew(10, 5, limit.WithEngine(eng), limit.WithSize(1, 64), limit.WithSeed(1))
		}
		a := mk()
		for range 5 {
			a.Allow("k")
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatalf("%v WriteTo: %v", eng, err)
		}
		b := mk()
		if _, err := b.ReadFrom(&buf); err != nil {
			t.Fatalf("%v ReadFrom: %v", eng, err)
		}
		if b.Allow("k") {
			t.Errorf("%v: the restored key was admitted past its burst", eng)
		}
	}
}

// a133Slow returns rates around and below New's floor (about 2.9e-36/s).
func a133Slow() []float64 {
	base := 1000 / math.MaxFloat32
	out := []float64{math.SmallestNonzeroFloat64, 1e-300, 1e-40, 1e-37, base / 2}
	for _, f := range []float64{1 - 1e-6, 1 - 1e-9, 1, 1 + 1e-9, 1 + 1e-7, 1 + 1e-6, 1.01, 2} {
		r := base * f
		out = append(out, math.Nextafter(r, 0), r, math.Nextafter(r, 1))
	}
	return out
}

// TestAudit133ParseFloorMatchesNewEverywhere: ParseLimit doc: it refuses
// "a rate New refuses whatever the burst (zero, above 1e22, or below
// about 2.9e-36 per second, ...)". Checked, for rates around the floor
// and far below it: a rate ParseLimit refuses (its MarshalText form) is
// refused by New at every burst (1, 2, 1000, 2^24), on every engine,
// at MaxDebt burst and 2^24 and by default; a rate it accepts is taken
// by New at burst 1 and MaxDebt 1 on Auto and CountMin. The refusal is
// a *sketch.ConfigError naming Limit, prefixed "limit: ", and the bound
// its message states ("2.94e-36") is itself accepted.
func TestAudit133ParseFloorMatchesNewEverywhere(t *testing.T) {
	refused, accepted := 0, 0
	for _, r := range a133Slow() {
		b, _ := limit.Limit(r).MarshalText()
		got, perr := limit.ParseLimit(string(b))
		if perr == nil {
			accepted++
			if got != limit.Limit(r) {
				t.Errorf("rate %v: %q reads back %v", r, b, float64(got))
			}
			for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
				if _, err := limit.New(got, 1, limit.WithMaxDebt(1), limit.WithEngine(eng)); err != nil {
					t.Errorf("rate %v: ParseLimit accepts it, New(r, 1, WithMaxDebt(1), %v) refuses: %v", r, eng, err)
				}
			}
			continue
		}
		refused++
		if a133Field(perr) != "Limit" || !errors.Is(perr, sketch.ErrInvalidConfig) || !strings.HasPrefix(perr.Error(), "limit: ") {
			t.Errorf("rate %v: ParseLimit(%q) = %v; want a ConfigError naming Limit", r, b, perr)
		}
		for _, burst := range []int{1, 2, 1000, 1 << 24} {
			for _, eng := range []limit.Engine{limit.Auto, limit.Buckets, limit.CountMin} {
				for _, md := range []float64{0, float64(burst), 1 << 24} {
					opts := []limit.Option{limit.WithEngine(eng), limit.WithSize(1, 8)}
					if eng == limit.Buckets {
						opts = []limit.Option{limit.WithEngine(eng), limit.WithCapacity(4, 0.1)}
					}
					if md != 0 {
						opts = append(opts, limit.WithMaxDebt(md))
					}
					if _, err := limit.New(limit.Limit(r), burst, opts...); err == nil {
						t.Errorf("rate %v: ParseLimit refuses it, New(r, %d, %v, MaxDebt %v) accepts it", r, burst, eng, md)
					}
				}
			}
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("the rates do not straddle the floor: %d refused, %d accepted", refused, accepted)
	}
	_, perr := limit.ParseLimit("1e-37/s")
	if perr == nil || !strings.Contains(perr.Error(), ">= 2.94e-36 per second") {
		t.Fatalf("ParseLimit(1e-37/s): %v", perr)
	}
	if r, err := limit.ParseLimit("2.94e-36/s"); err != nil {
		t.Errorf("ParseLimit of the message's own bound: %v, %v", float64(r), err)
	}
	// The other forms reach the same floor: per hour, per day, ulule's.
	for _, s := range []string{"1/1e36h", "1e-40-D", "1e-33/d"} {
		if _, err := limit.ParseLimit(s); a133Field(err) != "Limit" {
			t.Errorf("ParseLimit(%q) = %v; want refused (below the floor)", s, err)
		}
	}
	if _, err := limit.ParseLimit("1e-30/d"); err != nil {
		t.Errorf("ParseLimit(1e-30/d), %v/s above the floor: %v", 1e-30/86400, err)
	}
}

// TestAudit133DecodersBelowFloor: UnmarshalJSON (a number or a string),
// UnmarshalText and flag.TextVar refuse a rate below the floor with the
// same ConfigError, leaving the Limit unchanged; a number just above it
// decodes.
func TestAudit133DecodersBelowFloor(t *testing.T) {
	var v struct{ L limit.Limit }
	v.L = 7
	for _, in := range []string{`{"L": 1e-37}`, `{"L": "1e-37/s"}`, `{"L": "1e-37"}`, `{"L": 5e-324}`} {
		err := json.Unmarshal([]byte(in), &v)
		if a133Field(err) != "Limit" || v.L != 7 {
			t.Errorf("json %s: %v, L %v; want a ConfigError naming Limit and L unchanged", in, err, float64(v.L))
		}
	}
	if err := json.Unmarshal([]byte(`{"L": 3e-36}`), &v); err != nil || v.L != 3e-36 {
		t.Errorf("json 3e-36: %v, %v", err, float64(v.L))
	}
	var l limit.Limit = 7
	if err := l.UnmarshalText([]byte("1e-37")); a133Field(err) != "Limit" || l != 7 {
		t.Errorf("UnmarshalText(1e-37): %v, %v", err, float64(l))
	}
	fs := flag.NewFlagSet("a133", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	var fl limit.Limit
	fs.TextVar(&fl, "rate", limit.Limit(10), "")
	if err := fs.Parse([]string{"-rate", "1e-37/s"}); err == nil || fl != 10 {
		t.Errorf("flag -rate 1e-37/s: %v, %v", err, float64(fl))
	}
}
