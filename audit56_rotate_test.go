package grudge_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testhook"
)

// docs/snapshots.md: "a `Rotate` (a grudge `Ticker`'s tick) during the
// encode makes `WriteTo` fail (take it again)"; docs/design.md: "A manual
// `Rotate` (a grudge Ticker) is not held off: the encode fails instead."
func TestAudit56TickDuringWriteToFails(t *testing.T) {
	clock := grudgetest.NewFakeClock()
	ticker := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 10, Decay: grudge.Linear(1), Clock: clock},
		Period: 15 * time.Second, Ticker: ticker,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Update([]byte("k"), 3)
	w := &testhook.Writer{Hook: func() { ticker.Tick() }}
	_, err = r.Native().WriteTo(w)
	if err == nil {
		t.Fatal("WriteTo succeeded across a tick's rotation; snapshots.md: it fails")
	}
	if !strings.HasPrefix(err.Error(), "rotator: ") {
		t.Errorf("error %q lacks the rotator: prefix", err)
	}
	if got := r.Rotations(); got != 1 {
		t.Errorf("Rotations() = %d after the tick, want 1 (not held off)", got)
	}
	var b bytes.Buffer
	if _, err := r.Native().WriteTo(&b); err != nil {
		t.Errorf("a second WriteTo (take it again) failed: %v", err)
	}
}
