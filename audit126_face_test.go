package grudge_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge"
)

// Audit 126 also found (*grudge.Sketch).TryUpdate no longer inlined once
// the zero-value check went through a helper (cost 81 over the budget
// of 80): fixed at stop 63 by checking in the method itself; the root's
// hot methods are now in atomiccell's TestInlining.

// TestAudit126FixedRootZeroNativeDocFalse (audit 126; fixed at stop 63, the text below says what was wrong): stop 63's docs say the zero
// grudge.Sketch's "methods panic with \"grudge: zero Sketch; use New\""
// (sketch.go:10) and the zero Rotator's "methods but Close panic"
// (rotator.go:49), but Native on either returns nil and panics with
// nothing, so a caller's next call on it dies with a nil dereference, the
// very message the change set out to remove. Fix: say "but Native, which
// returns nil" (and "but Close and Native") in both docs, or check in
// Native as the other methods do. The test passes with either fix: a
// Native that does not panic must be named in its type's doc.
func TestAudit126FixedRootZeroNativeDocFalse(t *testing.T) {
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range []string{"sketch.go", "rotator.go"} {
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE && g.Doc != nil {
				docs[g.Specs[0].(*ast.TypeSpec).Name.Name] = g.Doc.Text()
			}
		}
	}
	var s grudge.Sketch
	if got := audit126Panic(func() { _ = s.Native() }); got == "" && !strings.Contains(docs["Sketch"], "Native") {
		t.Errorf("zero grudge.Sketch.Native returns nil without a panic, but Sketch's doc says its methods panic with \"grudge: zero Sketch; use New\" and names no exception")
	}
	var r grudge.Rotator
	if got := audit126Panic(func() { _ = r.Native() }); got == "" && !strings.Contains(docs["Rotator"], "Native") {
		t.Errorf("zero grudge.Rotator.Native returns nil without a panic, but Rotator's doc says its methods but Close panic with \"grudge: zero Rotator; use NewRotator\"")
	}
}

// audit126Panic runs f and returns its panic value as a string ("" if none).
func audit126Panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
