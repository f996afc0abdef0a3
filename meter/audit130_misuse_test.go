package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit130IsConfigError(err error) bool {
	var ce *sketch.ConfigError
	return errors.As(err, &ce) && errors.Is(err, sketch.ErrInvalidConfig) && strings.HasPrefix(fmt.Sprint(err), "meter: ")
}

// TestAudit130ZeroValuesRemainingMethods: the zero Rate's and Novelty's
// methods audit 125 did not call (ObserveAt, PerSecondAt, WriteTo,
// ReadFrom, SeenAt, Contains, ContainsAt, SnapshotSize, and Inflight's
// TryAcquire) panic "meter: zero X" (package doc: "The zero Rate, Inflight
// and Novelty panic (\"meter: zero Rate; use NewRate\") rather than
// dereference nil").
func TestAudit130ZeroValuesRemainingMethods(t *testing.T) {
	var r meter.Rate
	var n meter.Novelty
	var in meter.Inflight
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Rate.ObserveAt", "meter: zero Rate", func() { r.ObserveAt(now, "k", 1) }},
		{"Rate.PerSecondAt", "meter: zero Rate", func() { r.PerSecondAt(now, "k") }},
		{"Rate.WriteTo", "meter: zero Rate", func() { _, _ = r.WriteTo(&bytes.Buffer{}) }},
		{"Rate.ReadFrom", "meter: zero Rate", func() { _, _ = r.ReadFrom(&bytes.Buffer{}) }},
		{"Novelty.SeenAt", "meter: zero Novelty", func() { n.SeenAt(now, "k") }},
		{"Novelty.Contains", "meter: zero Novelty", func() { n.Contains("k") }},
		{"Novelty.ContainsAt", "meter: zero Novelty", func() { n.ContainsAt(now, "k") }},
		{"Novelty.SnapshotSize", "meter: zero Novelty", func() { n.SnapshotSize() }},
		{"Novelty.WriteTo", "meter: zero Novelty", func() { _, _ = n.WriteTo(&bytes.Buffer{}) }},
		{"Novelty.ReadFrom", "meter: zero Novelty", func() { _, _ = n.ReadFrom(&bytes.Buffer{}) }},
		{"Inflight.TryAcquire", "meter: zero Inflight", func() { in.TryAcquire("k", 1) }},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: panic %q, want one starting %q", c.name, got, c.want)
		}
	}
}

// TestAudit130NilClockAndHasher: WithClock(nil) and WithHasher(nil) are
// refused with a *sketch.ConfigError prefixed "meter: " or mean the default;
// a meter the constructor accepts then works without a nil dereference.
func TestAudit130NilClockAndHasher(t *testing.T) {
	small := meter.WithSize(2, 16)
	for _, c := range []struct {
		name string
		opt  meter.Option
	}{
		{"WithClock(nil)", meter.WithClock(nil)},
		{"WithHasher(nil)", meter.WithHasher(nil)},
	} {
		for _, kind := range []string{"Rate", "Novelty", "Inflight"} {
			var err error
			var use func()
			msg := testpanic.Message(func() {
				switch kind {
				case "Rate":
					var r *meter.Rate
					r, err = meter.NewRate(time.Second, small, c.opt)
					use = func() { r.Observe("k"); _ = r.PerSecond("k") }
				case "Novelty":
					var n *meter.Novelty
					n, err = meter.NewNovelty(time.Second, small, c.opt)
					use = func() {
						if n.Seen("k") || !n.Seen("k") {
							t.Errorf("%s Novelty: Seen not false then true", c.name)
						}
					}
				case "Inflight":
					var in *meter.Inflight
					in, err = meter.NewInflight(2, small, c.opt)
					use = func() {
						g := in.TryAcquire("k", 1)
						if g == nil || in.TryAcquire("k", 1) != nil {
							t.Errorf("%s Inflight: TryAcquire max 1 not once", c.name)
						}
						g.Release()
					}
				}
			})
			if msg != "" {
				t.Errorf("%s %s: constructor panicked: %s", c.name, kind, msg)
				continue
			}
			if err != nil {
				if !audit130IsConfigError(err) {
					t.Errorf("%s %s: error %v, want a *sketch.ConfigError prefixed \"meter: \"", c.name, kind, err)
				}
				continue
			}
			if msg := testpanic.Message(use); msg != "" {
				t.Errorf("%s %s: accepted, then a call panicked: %s", c.name, kind, msg)
			}
		}
	}
}

// TestAudit130DurationBounds: the window and within are >= 1 ms and, times
// PeriodWindows, at most 2^62 ns (NewRate, NewNovelty docs): the bounds
// themselves are taken, one past them refused with a typed error; a
// PeriodWindows of 1 is the least taken.
func TestAudit130DurationBounds(t *testing.T) {
	small := meter.WithSize(2, 16)
	ok := func(name string, err error) {
		if err != nil {
			t.Errorf("%s: %v, want accepted", name, err)
		}
	}
	bad := func(name string, err error) {
		if !audit130IsConfigError(err) {
			t.Errorf("%s: %v, want a *sketch.ConfigError prefixed \"meter: \"", name, err)
		}
	}
	_, err := meter.NewRate(time.Millisecond, small)
	ok("Rate 1ms", err)
	_, err = meter.NewRate(time.Millisecond-1, small)
	bad("Rate 1ms-1ns", err)
	_, err = meter.NewNovelty(time.Millisecond, small)
	ok("Novelty 1ms", err)
	_, err = meter.NewNovelty(time.Millisecond-1, small)
	bad("Novelty 1ms-1ns", err)
	_, err = meter.NewRate(1<<62, small, meter.WithPeriodWindows(1))
	ok("Rate 2^62 x 1", err)
	_, err = meter.NewRate(1<<62+1, small, meter.WithPeriodWindows(1))
	bad("Rate 2^62+1 x 1", err)
	_, err = meter.NewNovelty(1<<58, small, meter.WithPeriodWindows(16))
	ok("Novelty 2^58 x 16", err)
	_, err = meter.NewNovelty(1<<58+1, small)
	bad("Novelty 2^58+1 x default 16", err)
	_, err = meter.NewRate(time.Second, small, meter.WithPeriodWindows(math.Nextafter(1, 0)))
	bad("PeriodWindows just below 1", err)
	for _, k := range []float64{0, -1, math.Inf(-1), 5e-324, math.MaxFloat64} {
		_, err = meter.NewNovelty(time.Second, small, meter.WithPeriodWindows(k))
		bad(fmt.Sprintf("Novelty PeriodWindows %v", k), err)
	}
}

// TestAudit130InflightIgnoresRotationOptions: NewInflight doc: "Rotation
// options (WithPeriodWindows, WithPrefetch) do not apply and are not
// checked": a NaN PeriodWindows is accepted there; maxLimit 0 means 2^24,
// so TryAcquire(2^24) is taken and 2^24+1 panics "meter:".
func TestAudit130InflightIgnoresRotationOptions(t *testing.T) {
	in, err := meter.NewInflight(0, meter.WithSize(2, 16), meter.WithPeriodWindows(math.NaN()), meter.WithPrefetch(false))
	if err != nil {
		t.Fatalf("NewInflight with a NaN PeriodWindows: %v, want accepted (not checked)", err)
	}
	if g := in.TryAcquire("k", 1<<24); g == nil {
		t.Errorf("TryAcquire(2^24) on maxLimit 0 refused")
	} else {
		g.Release()
	}
	if got := testpanic.Message(func() { in.TryAcquire("k", 1<<24+1) }); !strings.HasPrefix(got, "meter:") {
		t.Errorf("TryAcquire(2^24+1): panic %q, want one starting \"meter:\"", got)
	}
	if in.Count("k") != 0 {
		t.Errorf("Count after release and a refused TryAcquire: %d, want 0", in.Count("k"))
	}
}

// TestAudit130SizesAndMaxBytes: WithSize(0, 0) keeps the default, a size
// above MaxBytes is a typed error (never allocated), and WithMaxBytes(0)
// is the default cap (WithMaxBytes doc).
func TestAudit130SizesAndMaxBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"Rate MaxUint32^2", func() error {
			_, err := meter.NewRate(time.Second, meter.WithSize(math.MaxUint32, math.MaxUint32))
			return err
		}},
		{"Novelty cells above MaxBytes", func() error {
			_, err := meter.NewNovelty(time.Second, meter.WithSize(4, 1<<20), meter.WithMaxBytes(1<<20))
			return err
		}},
		{"Inflight cells above MaxBytes", func() error {
			_, err := meter.NewInflight(10, meter.WithSize(4, 1<<20), meter.WithMaxBytes(1<<20))
			return err
		}},
		{"Inflight MaxBytes MinInt64", func() error {
			_, err := meter.NewInflight(10, meter.WithMaxBytes(math.MinInt64))
			return err
		}},
		{"Rate nil among options", func() error {
			_, err := meter.NewRate(time.Second, meter.WithSize(2, 16), nil, meter.WithSeed(1))
			return err
		}},
		{"Novelty nil option", func() error { _, err := meter.NewNovelty(time.Second, nil); return err }},
		{"Inflight nil option", func() error { _, err := meter.NewInflight(1, nil); return err }},
	} {
		var err error
		if msg := testpanic.Message(func() { err = c.f() }); msg != "" {
			t.Errorf("%s: panicked: %s", c.name, msg)
			continue
		}
		if !audit130IsConfigError(err) {
			t.Errorf("%s: %v, want a *sketch.ConfigError prefixed \"meter: \"", c.name, err)
		}
	}
	if _, err := meter.NewInflight(10, meter.WithSize(0, 0), meter.WithMaxBytes(0)); err != nil {
		t.Errorf("WithSize(0,0), WithMaxBytes(0) (defaults): %v", err)
	}
}

// TestAudit130KeysAndTimes: the empty key and a 1 MiB key are keys like any
// other; a zero time.Time and a far-future t in ObserveAt, PerSecondAt,
// SeenAt and ContainsAt neither panic nor read NaN or a negative rate.
func TestAudit130KeysAndTimes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	long := strings.Repeat("x", 1<<20)
	r, err := meter.NewRate(time.Second, meter.WithSize(4, 1024), meter.WithClock(clk), meter.WithSeed(130))
	if err != nil {
		t.Fatal(err)
	}
	n, err := meter.NewNovelty(time.Second, meter.WithSize(4, 1024), meter.WithClock(clk), meter.WithSeed(130))
	if err != nil {
		t.Fatal(err)
	}
	in, err := meter.NewInflight(3, meter.WithSize(4, 1024), meter.WithSeed(130))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", long} {
		r.Observe(k)
		if got := r.PerSecond(k); !(got > 0) {
			t.Errorf("Rate key len %d: PerSecond %v after one Observe, want > 0", len(k), got)
		}
		if n.Seen(k) || !n.Seen(k) {
			t.Errorf("Novelty key len %d: Seen not false then true", len(k))
		}
		g := in.Acquire(k)
		if in.Count(k) != 1 {
			t.Errorf("Inflight key len %d: Count %d, want 1", len(k), in.Count(k))
		}
		g.Release()
	}
	if r.PerSecond("fresh") != 0 || n.Contains("fresh") {
		t.Errorf("a fresh key reads as seen after \"\" and a 1 MiB key: rate %v contains %v", r.PerSecond("fresh"), n.Contains("fresh"))
	}
	for _, tm := range []time.Time{{}, time.Unix(0, math.MaxInt64), time.Unix(math.MaxInt64, 0), time.Unix(math.MinInt64, 0)} {
		msg := testpanic.Message(func() {
			r.ObserveAt(tm, "t", 1)
			if got := r.PerSecondAt(tm, "t"); math.IsNaN(got) || got < 0 {
				t.Errorf("PerSecondAt(%v) = %v", tm, got)
			}
			_ = n.SeenAt(tm, "t")
			_ = n.ContainsAt(tm, "t")
		})
		if msg != "" {
			t.Errorf("t = %v: panicked: %s", tm, msg)
		}
	}
	if got := r.PerSecond(""); math.IsNaN(got) || got < 0 {
		t.Errorf("after odd times: PerSecond(\"\") = %v", got)
	}
}
