package grudge_test

import (
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit96RootDocFixedPseudoCodeReturnsUnrounded (audit 96; fixed at
// stop 59 in the doc, the text below says what was wrong; v[l] is now
// roundUp32(s)). doc.go's model,
// the pseudo-code of every operation, computes
//
//	s := clamp(decay(w.score, now-w.age) + delta, Lo, Hi)
//	if cas(c, w, {roundUp32(s), now}): break
//	v[l] = s
//	return aggregate(v)
//
// so UpdateAndQuery returns the aggregate of the unrounded s: 0.1 for a
// first UpdateAndQuery(k, 0.1). The code returns the aggregate of the
// scores it stored (internal/core/sketch.go, updateAndQuery: "the
// aggregate of the scores it stored"), 0.10000000149011612, the float32
// round-up precision.md describes ("0.1 is stored as 0.10000000149").
// The two documents disagree; the pseudo-code's v[l] should be the stored
// roundUp32(s) (capped at Hi).
func TestAudit96RootDocFixedPseudoCodeReturnsUnrounded(t *testing.T) {
	s, err := grudge.New(grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 1, Clock: grudgetest.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	want := float64(float32(0.1)) // 0.1 rounds up to this float32
	if want < 0.1 {
		t.Fatalf("float32(0.1) = %.17g rounds down", want)
	}
	if got := s.UpdateAndQuery([]byte("k"), 0.1); got != want {
		t.Errorf("first UpdateAndQuery(k, 0.1) = %.17g; doc.go's pseudo-code returns aggregate(v) with v[l] = roundUp32(0.1) = %.17g", got, want)
	}
}
