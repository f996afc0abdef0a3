package limit_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit62FixedLimiterWriteToRefusalUndocumented: a count-min
// limiter's WriteTo fails with an error matching sketch.ErrTakeAgain
// when its Period ends during the encode (sketch/errors.go lists "a
// count-min limiter" among the WriteTos that return it, and commit
// 60e6b62 exported it "so a caller of WriteTo can match it"), but
// neither Limiter.WriteTo's doc (limit/persist.go) nor the package's
// "Saving and restoring" section (limit/doc.go) says it can fail at all,
// or names sketch.ErrTakeAgain: "It may run concurrently with every other
// method and never blocks them". The meter's WriteTo doc says it
// (meter/persist.go: "It fails with an error matching
// sketch.ErrTakeAgain when a Period ended during the encode ...").
func TestAudit62FixedLimiterWriteToRefusalUndocumented(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	l := a62Limiter(t, c, 2)
	c.Set(a62T0 + 1990)
	l.AllowN(c.Now(), "k", 10)
	hw := &testhook.Writer{N: 4, Hook: func() {
		c.Set(a62T0 + 2010) // the deadline (+2000) passes
		l.AllowN(c.Now(), "w", 1)
	}}
	_, err := l.WriteTo(hw)
	if !errors.Is(err, sketch.ErrTakeAgain) {
		t.Fatalf("setup: a Period ended during a count-min limiter's encode: WriteTo = %v, want an error matching sketch.ErrTakeAgain", err)
	}
	fset := token.NewFileSet()
	var docs []string
	for _, name := range []string{"persist.go", "doc.go"} {
		f, perr := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if perr != nil {
			t.Fatal(perr)
		}
		if name == "doc.go" {
			docs = append(docs, f.Doc.Text())
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "WriteTo" && fd.Doc != nil {
				docs = append(docs, fd.Doc.Text())
			}
		}
	}
	all := strings.Join(docs, "\n")
	if !strings.Contains(all, "ErrTakeAgain") && !strings.Contains(all, "take the snapshot again") && !strings.Contains(all, "take it again") {
		t.Errorf("a count-min limiter's WriteTo returned %q (matches sketch.ErrTakeAgain), but limit/persist.go's WriteTo doc and limit/doc.go never say WriteTo can fail "+
			"or name sketch.ErrTakeAgain (persist.go: \"It may run concurrently with every other method and never blocks them\"); sketch/errors.go: ErrTakeAgain \"is matched by the error of a WriteTo (sketch, rotator, meter, a count-min limiter)\"", err)
	}
}
