package grudge_test

import (
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/sketch"
)

// suggest.go: "Degenerate inputs have no answer and are refused with an
// error naming the argument and its value (prefix "grudge: "): hotKeys or
// cellsPerLevel 0, targetP NaN or outside (0, 1)." doc.go: "SuggestLevels
// answers at most 8 and refuses degenerate inputs with an error."
func TestAudit56SuggestLevelsRefusesDegenerate(t *testing.T) {
	cases := []struct {
		h, m uint32
		p    float64
		arg  string
		val  string
	}{
		{0, 16, 0.01, "hotKeys", "0"},
		{2, 0, 0.01, "cellsPerLevel", "0"},
		{2, 16, math.NaN(), "targetP", "NaN"},
		{2, 16, 0, "targetP", "0"},
		{2, 16, 1, "targetP", "1"},
		{2, 16, -0.5, "targetP", "-0.5"},
		{2, 16, 1.5, "targetP", "1.5"},
		{2, 16, math.Inf(1), "targetP", "+Inf"},
		{2, 16, math.Inf(-1), "targetP", "-Inf"},
	}
	for _, c := range cases {
		l, err := grudge.SuggestLevels(c.h, c.m, c.p)
		if err == nil {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, nil; doc: refused with an error", c.h, c.m, c.p, l)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "grudge: ") || !strings.Contains(msg, c.arg) || !strings.Contains(msg, c.val) {
			t.Errorf("SuggestLevels(%d, %d, %v) error %q: doc says prefix \"grudge: \", naming %s and its value %s", c.h, c.m, c.p, msg, c.arg, c.val)
		}
		if l != 0 {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d with an error", c.h, c.m, c.p, l)
		}
	}
	// Valid inputs: no error, 1..8, the sketch's answer (same order).
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{1000, 100_000, 0.01}, {2, 16, 31.0 / 256}, {2, 16, 0.1}, {1 << 30, 1, 1e-300}, {1, 1 << 31, 0.5}} {
		l, err := grudge.SuggestLevels(c.h, c.m, c.p)
		if err != nil || l < 1 || l > 8 || l != sketch.SuggestLevels(c.h, c.m, c.p) {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, %v; want 1..8, nil, equal to sketch's %d", c.h, c.m, c.p, l, err, sketch.SuggestLevels(c.h, c.m, c.p))
		}
	}
	// migrating.md: "31/256 for 2 hot keys in 16 cells" is level 1's rate, and
	// a target equal to it is met by 1 level.
	if l, _ := grudge.SuggestLevels(2, 16, 31.0/256); l != 1 {
		t.Errorf("SuggestLevels(2, 16, 31/256) = %d, migrating.md: a target equal to a level's rate is met by it (1)", l)
	}
	if l, _ := grudge.SuggestLevels(2, 16, math.Nextafter(31.0/256, 0)); l != 2 {
		t.Errorf("SuggestLevels(2, 16, 31/256 - ulp) = %d, want 2", l)
	}
	// migrating.md: "SuggestLevels(1000, 100_000, 0.01): 8 levels instead of 1"
	if l, _ := grudge.SuggestLevels(1000, 100_000, 0.01); l != 1 {
		t.Errorf("SuggestLevels(1000, 100_000, 0.01) = %d, migrating.md says 1", l)
	}
	// migrating.md: "sketch.SuggestLevels keeps its single result (0 hot
	// keys: 1 level; a NaN target: 8)"; "cellsPerLevel 0 means the default".
	if l := sketch.SuggestLevels(0, 1, 0.5); l != 1 {
		t.Errorf("sketch.SuggestLevels(0, 1, p) = %d, migrating.md: no hot keys need one level", l)
	}
	if l := sketch.SuggestLevels(5, 100, math.NaN()); l != 8 {
		t.Errorf("sketch.SuggestLevels(5, 100, NaN) = %d, migrating.md: a NaN target: 8", l)
	}
	def := sketch.Config{}
	_ = def
	if a, b := sketch.SuggestLevels(1000, 0, 0.01), sketch.SuggestLevels(1000, a56DefaultCells(t), 0.01); a != b {
		t.Errorf("sketch.SuggestLevels(1000, 0, 0.01) = %d, with the default cells %d, migrating.md: 0 means the default", a, b)
	}
}

func a56DefaultCells(t *testing.T) uint32 {
	s, err := sketch.New(sketch.Config{Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s.Config().CellsPerLevel
}
