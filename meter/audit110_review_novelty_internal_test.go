package meter

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a110FirstSightingUnderConflict runs audit 109's interleaving on n's
// current primary: key k never seen; j (another stripe) shares k's
// level-1 cell only and was seen 10 ms ago; Seen(j) refreshes that cell
// between Seen(k)'s level-0 and level-1 CASes. It reports whether Seen(k)
// said "seen".
func a110FirstSightingUnderConflict(t *testing.T, n *Novelty, clk *sketchtest.FakeClock, tag string) bool {
	t.Helper()
	p := n.rot().Current().Gens[0]
	idx := func(key string) []uint32 {
		_, ix := core.Detailed(p, []byte(key), func(_, i uint32, _ float64) uint32 { return i })
		return ix
	}
	k := "k-" + tag
	ki := idx(k)
	j := ""
	for i := 0; i < 200_000 && j == ""; i++ {
		c := fmt.Sprintf("j%s-%d", tag, i)
		ci := idx(c)
		if ci[1] == ki[1] && ci[0] != ki[0] && core.StripeOf(p, []byte(c)) != core.StripeOf(p, []byte(k)) && !n.Contains(c) {
			j = c
		}
	}
	if j == "" || n.Contains(k) {
		t.Fatalf("%s: no key j shares k's level-1 cell alone, or k already marked", tag)
	}
	if n.Seen(j) {
		t.Fatalf("%s: j seen before its first sighting", tag)
	}
	clk.Advance(10 * time.Millisecond)
	if n.rot().Current().Gens[0] != p {
		t.Fatalf("%s: the primary changed during the setup", tag)
	}
	fired, jSeen := false, false
	core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 && !fired {
			fired = true
			jSeen = n.Seen(j)
		}
	}})
	seen := n.Seen(k)
	core.SetHooks(p, core.Hooks{})
	if !fired || !jSeen {
		t.Fatalf("%s: the interleaving did not happen (fired %v, j seen %v)", tag, fired, jSeen)
	}
	return seen
}

// TestAudit110NoveltyFinalAdmissionSurvivesPromotionAndRestore (audit 110;
// passes: a changed promise with no test of its own). Novelty's
// first-sighting promise under a commit conflict rests on
// Config.FinalAdmission (audit 109), which the rotator must carry to
// every generation it builds later: the promotion's successors
// (buildSeeded from the rotator's config) and the generations a
// ReadFrom (ReadFromAdopt) decodes. Audit 109's interleaving is run on a
// primary built by a promotion (a jump of two Periods rebuilds both
// generations) and on a primary restored from a snapshot into a fresh
// Novelty: Seen(k) must still tell its first sighting "new".
func TestAudit110NoveltyFinalAdmissionSurvivesPromotionAndRestore(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	mk := func() *Novelty {
		n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(110), WithSize(2, 64), WithPrefetch(false))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := mk()
	built := n.rot().Stats().Allocated
	clk.Advance(n.rot().Config().Period * 3) // both generations rebuilt by the promotion
	n.Contains("x")                          // promote
	if st := n.rot().Stats(); st.Allocated < built+2 {
		t.Fatalf("promotion built %d generations; want 2", st.Allocated-built)
	}
	if a110FirstSightingUnderConflict(t, n, clk, "promoted") {
		t.Errorf("on a primary built by a promotion, Seen(k) told its first sighting seen: FinalAdmission lost")
	}
	var buf bytes.Buffer
	if _, err := n.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	m := mk()
	if _, err := m.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	if a110FirstSightingUnderConflict(t, m, clk, "restored") {
		t.Errorf("on a primary restored by ReadFrom, Seen(k) told its first sighting seen: FinalAdmission lost")
	}
}
