package rotator

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a99EngineGoroutines counts the goroutines, other than the caller, with
// a frame in this module's rotator or engine code.
func a99EngineGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller's own goroutine comes first
			continue
		}
		if strings.Contains(g, "grudge/internal/core.") || strings.Contains(g, "grudge/rotator.") {
			n++
		}
	}
	return n
}

// TestAudit99RotCloseNoGoroutine: doc.go: "No background work: no
// goroutine or ticker, ever. Close is an idempotent no-op"; API.md:
// "rotation happens lazily on access (no ticker, no goroutine)". New,
// operations across promotions (one of k periods included), a snapshot
// and a restore start no goroutine running rotator or engine code (read
// from runtime.Stack, so nothing needs to settle); Close may be called
// twice, and the rotator then still rotates and forgets on its clock.
func TestAudit99RotCloseNoGoroutine(t *testing.T) {
	before := a99EngineGoroutines()
	clk := sketchtest.NewFakeClock()
	clk.Set(a99T0)
	r := a99Rot(t, clk, 3, 10*time.Millisecond)
	r.UpdateString("k", 1)
	clk.Advance(10 * time.Millisecond)
	r.TryUpdateString("k", 1, 10)
	clk.Advance(45 * time.Millisecond)
	r.UpdateString("k", 4)
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrom(&b); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if n := a99EngineGoroutines(); n > before {
		t.Fatalf("%d goroutine(s) in rotator or engine code after New, promotions, a snapshot and Close (were %d)", n, before)
	}
	if got := r.QueryString("k"); got != 4 {
		t.Fatalf("after Close: Query %v, want 4", got)
	}
	clk.Advance(30 * time.Millisecond)
	if got := r.QueryString("k"); got != 0 {
		t.Fatalf("after Close, N x Period later: Query %v, want 0 (rotation goes on)", got)
	}
	if st := r.Stats(); st.Promotions != 3 || st.Periods != 8 {
		t.Fatalf("Stats %+v, want 3 promotions of 1, 4 and 3 periods", st)
	}
}
