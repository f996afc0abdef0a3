package meter_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
)

// TestConfigErrors: every constructor error is a *sketch.ConfigError
// naming the field, prefixed "meter: ", matched by sketch.ErrInvalidConfig;
// a nil Option is one (before: a nil dereference), and sizes are bounded
// over all of a meter's sketches (WithMaxBytes).
func TestConfigErrors(t *testing.T) {
	type ctor func(...meter.Option) error
	rate := func(w time.Duration) ctor {
		return func(o ...meter.Option) error { _, err := meter.NewRate(w, o...); return err }
	}
	novelty := func(w time.Duration) ctor {
		return func(o ...meter.Option) error { _, err := meter.NewNovelty(w, o...); return err }
	}
	inflight := func(m int) ctor {
		return func(o ...meter.Option) error { _, err := meter.NewInflight(m, o...); return err }
	}
	for i, c := range []struct {
		f     ctor
		opts  []meter.Option
		field string
	}{
		{rate(0), nil, "Window"},
		{novelty(-time.Second), nil, "Window"},
		{inflight(-1), nil, "MaxLimit"},
		{inflight(1 << 25), nil, "MaxLimit"},
		{rate(time.Second), []meter.Option{nil}, "Option"},
		{novelty(time.Second), []meter.Option{meter.WithSeed(1), nil}, "Option"},
		{inflight(0), []meter.Option{nil}, "Option"},
		{rate(time.Second), []meter.Option{meter.WithPeriodWindows(math.NaN())}, "PeriodWindows"},
		{rate(time.Second), []meter.Option{meter.WithSize(9, 0)}, "Levels"},
		{rate(time.Second), []meter.Option{meter.WithSize(8, 1<<26)}, "Size"}, // 2 x 4 GiB
		{novelty(time.Second), []meter.Option{meter.WithSize(4, 1000), meter.WithMaxBytes(2*core.CellBytes(4, 1000) - 1)}, "Size"},
		{inflight(0), []meter.Option{meter.WithMaxBytes(-1)}, "MaxBytes"},
	} {
		err := c.f(c.opts...)
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != c.field ||
			!strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("case %d: %v, want a *sketch.ConfigError for %s", i, err, c.field)
		}
	}
}

// TestZeroValues: the zero Rate, Inflight and Novelty panic with a clear
// message (before: a nil dereference); a zero Guard's Release does
// nothing.
func TestZeroValues(t *testing.T) {
	var r meter.Rate
	var in meter.Inflight
	var n meter.Novelty
	for name, f := range map[string]func(){
		"Rate.Observe":        func() { r.Observe("k") },
		"Rate.PerSecond":      func() { r.PerSecond("k") },
		"Inflight.Acquire":    func() { in.Acquire("k") },
		"Inflight.TryAcquire": func() { in.TryAcquire("k", 1) },
		"Inflight.Count":      func() { in.Count("k") },
		"Novelty.Seen":        func() { n.Seen("k") },
		"Novelty.Contains":    func() { n.Contains("k") },
	} {
		func() {
			defer func() {
				s, _ := recover().(string)
				if !strings.HasPrefix(s, "meter: zero ") {
					t.Errorf("%s on a zero value: panic %q", name, s)
				}
			}()
			f()
			t.Errorf("%s on a zero value returned", name)
		}()
	}
	var g meter.Guard
	g.Release()
}
