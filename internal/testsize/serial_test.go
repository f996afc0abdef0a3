package testsize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestSerialMarksStartNothing reads every _test.go file of the library's
// module and of tests/ and fails for a test that calls Serial and whose
// body holds a go statement or a call to Parallel, RunParallel or Go (a
// sync.WaitGroup's or an errgroup's): such a test would lose the race
// detector while it races. It reads the body only; .ci/serial-tests
// follows the calls too, from an execution trace, and is what to run
// before marking a test.
func TestSerialMarksStartNothing(t *testing.T) {
	root := filepath.Join("..", "..")
	marked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "redis", "bench", "examples", "testdata", ".git", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !callsSerial(fn.Body) {
				continue
			}
			marked++
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: %s calls testsize.Serial and starts a goroutine", fset.Position(n.Pos()), fn.Name.Name)
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
						switch sel.Sel.Name {
						case "Parallel", "RunParallel", "Go":
							t.Errorf("%s: %s calls testsize.Serial and %s", fset.Position(n.Pos()), fn.Name.Name, sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The marks live in both modules; finding none means the walk
	// missed them.
	if marked < 50 {
		t.Fatalf("found %d tests that call testsize.Serial, want the 100 or so marked", marked)
	}
}

func callsSerial(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Serial" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testsize" {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
