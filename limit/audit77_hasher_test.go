package limit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit77NilHasherFaces: stop 48 made the rotator's Init build its
// first generations with buildErr, so the faces over a rotator (limit's
// count-min engine, meter's Rate and Novelty) return the *ConfigError
// naming Hasher for a factory that returns nil, instead of panicking.
func TestAudit77NilHasherFaces(t *testing.T) {
	nilF := func(uint64) sketch.Hasher { return nil }
	try := func(name string, f func() error) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = f()
		}()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Hasher" {
			t.Errorf("%s with a nil-returning HasherFactory: %v; want a *sketch.ConfigError naming Hasher", name, err)
		}
	}
	try("limit.New CountMin", func() error {
		_, err := limit.New(1, 5, limit.WithHasher(nilF), limit.WithEngine(limit.CountMin))
		return err
	})
	try("meter.NewRate", func() error { _, err := meter.NewRate(time.Second, meter.WithHasher(nilF)); return err })
	try("meter.NewNovelty", func() error { _, err := meter.NewNovelty(time.Second, meter.WithHasher(nilF)); return err })
}

// TestAudit77FixedBucketsNilHasher: limit.New: "An invalid argument or
// option is a *sketch.ConfigError naming it ... or an invalid option
// value". With WithEngine(CountMin) a HasherFactory that returns nil is
// one (the test above); with the Buckets engine, which Auto picks for
// New(1, 5), New returns no error and the first Allow panics with a nil
// dereference (internal/bucket/engine.go builds hasher: hf(seed) without
// a nil check).
func TestAudit77FixedBucketsNilHasher(t *testing.T) {
	nilF := func(uint64) sketch.Hasher { return nil }
	for _, e := range []limit.Engine{limit.Auto, limit.Buckets} {
		var err error
		var allowPanic any
		func() {
			var l *limit.Limiter
			l, err = limit.New(1, 5, limit.WithHasher(nilF), limit.WithEngine(e))
			if err != nil {
				return
			}
			defer func() { allowPanic = recover() }()
			l.Allow("k")
		}()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Hasher" {
			t.Errorf("limit.New(1, 5, WithHasher(returns nil), WithEngine(%v)): err = %v (then Allow panicked: %v); want a *sketch.ConfigError naming Hasher, as WithEngine(CountMin) gives",
				e, err, allowPanic)
		}
	}
}
