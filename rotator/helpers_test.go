package rotator

import (
	"testing"
)

func newRotator(t testing.TB, cfg Config) *Rotator {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(r.Close)
	return r
}
