package sketch_test

import (
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// TestMergeNilPanicsClearly: Merge(nil) is a programmer error and says
// so, rather than dereferencing nil (audit 49's note).
func TestMergeNilPanicsClearly(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 10})
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "sketch: Merge of a nil") {
			t.Fatalf("Merge(nil) panicked with %v, want a sketch: message", r)
		}
	}()
	_ = s.Merge(nil)
}
