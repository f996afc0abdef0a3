package meter_test

// Audit 145: audit 140's typed-nil refusals reach every meter
// constructor (NewRate is checked by audit 140; Novelty and Inflight
// here).

import (
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a145Hasher struct{ seed uint64 }

func (h *a145Hasher) Sum64(k []byte) uint64       { return h.seed ^ uint64(len(k)) }
func (h *a145Hasher) Sum64String(k string) uint64 { return h.seed ^ uint64(len(k)) }

// TestAudit145TypedNilsRefused: a WithHasher factory returning a typed
// nil and a typed-nil WithClock are *ConfigErrors naming the field from
// NewRate, NewNovelty and NewInflight, not a nil dereference later.
func TestAudit145TypedNilsRefused(t *testing.T) {
	nilHasher := func(uint64) sketch.Hasher { return (*a145Hasher)(nil) }
	for field, opt := range map[string]meter.Option{
		"Hasher": meter.WithHasher(nilHasher),
		"Clock":  meter.WithClock((*sketchtest.FakeClock)(nil)),
	} {
		for _, c := range []struct {
			name string
			f    func() error
		}{
			{"NewRate", func() error { _, err := meter.NewRate(time.Second, meter.WithSize(2, 16), opt); return err }},
			{"NewNovelty", func() error { _, err := meter.NewNovelty(time.Second, meter.WithSize(2, 16), opt); return err }},
			{"NewInflight", func() error { _, err := meter.NewInflight(4, meter.WithSize(2, 16), opt); return err }},
		} {
			var err error
			msg := testpanic.Message(func() { err = c.f() })
			var ce *sketch.ConfigError
			if msg != "" || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || ce.Field != field {
				t.Errorf("%s with a typed-nil %s: panic %q, err %v; want a *ConfigError naming %s", c.name, field, msg, err, field)
			}
		}
	}
}
