package reference_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/sketch/reference"
)

// TestAudit125FixedZeroReferenceRawNilPanic (audit 125; fixed at stop 63, the text below says what was wrong): "Its zero value is not
// usable; New builds one" (sketch/reference/reference.go:14). The zero
// reference.Sketch crashes with "runtime error: invalid memory address or
// nil pointer dereference"; limit's and meter's zero values panic with a
// clear "<pkg>: zero X; use New". Expected: a panic starting "reference:
// zero Sketch" (or "sketch: zero Sketch", as its twin should). Observed: a
// runtime nil dereference. Fix: a nil check of s.e in reference.go's
// methods.
func TestAudit125FixedZeroReferenceRawNilPanic(t *testing.T) {
	var s reference.Sketch
	var msg string
	func() {
		defer func() { msg = fmt.Sprint(recover()) }()
		s.Query([]byte("k"))
	}()
	if !strings.Contains(msg, "zero Sketch") {
		t.Errorf("zero reference.Sketch.Query: panic %q, want a clear \"...: zero Sketch; use New\"", msg)
	}
}
