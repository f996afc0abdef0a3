package rotator

import (
	"encoding/binary"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit62FixedWriteToDocSaysEachGenerationAsSketchWriteTo: the
// public Rotator.WriteTo doc (rotator/rotator.go) still says the
// snapshot holds "each generation as sketch.Sketch.WriteTo writes it",
// and sketch.Sketch.WriteTo's instant is the clock reading at the start
// of that sketch's encode (docs/snapshots.md: "T is one clock reading at
// the start"). Since 60e6b62 every generation is stated at the rotator's
// one instant instead (internal/core/rotator_snapshot.go, docs/snapshots.md:
// "Every generation is stated at the rotator's one snapshot instant"):
// with the clock moved 20 ms before generation 1's encode, its embedded
// header says the rotator's instant, not the +20 ms a Sketch.WriteTo of
// it would have read. The public doc also names only "If the set rotates
// during the encode (a Period ends)" as a failure, and not
// sketch.ErrTakeAgain, which the error matches.
func TestAudit62FixedWriteToDocSaysEachGenerationAsSketchWriteTo(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	r, err := New(a62Cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Set(a62T0 + 100)
	r.UpdateString("k", 1)
	S := a62T0 + 100
	hw := &testhook.Writer{N: 5, Hook: func() { c.Set(S + 20) }} // before generation 1's header
	if _, err := r.WriteTo(hw); err != nil {
		t.Fatal(err)
	}
	b := hw.Buf.Bytes()
	genSize := 88 + 8*2*1024 + 4
	g1 := int64(binary.LittleEndian.Uint64(b[56+genSize+72:]))
	f, err := parser.ParseFile(token.NewFileSet(), "rotator.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "WriteTo" && fd.Doc != nil {
			doc = fd.Doc.Text()
		}
	}
	if strings.Contains(doc, "each generation as") && strings.Contains(doc, "sketch.Sketch.WriteTo writes it") && g1 != S+20 {
		t.Errorf("Rotator.WriteTo's doc: %q; a Sketch.WriteTo of generation 1, started at +%d, states its instant as +%d, "+
			"but the snapshot's generation 1 says +%d (the rotator's one instant, docs/snapshots.md). The doc also does not name sketch.ErrTakeAgain or the clock-jump refusal",
			strings.Join(strings.Fields(doc), " "), S+20-a62T0, S+20-a62T0, g1-a62T0)
	}
}
