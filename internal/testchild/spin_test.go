package testchild_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cheapCalls are the calls a spin-wait's loop may make and still never
// reach a cooperative preemption point: atomic methods and the fake
// clocks' reads inline, and conversions and len are not calls at all.
var cheapCalls = map[string]bool{
	"Load": true, "Store": true, "Add": true, "Swap": true, "CompareAndSwap": true,
	"NowMillis": true, "len": true,
	"int": true, "int32": true, "int64": true, "uint32": true, "uint64": true, "float64": true,
}

// TestNoCallFreeSpinWaits: no test in the repository waits in a loop
// whose condition reads an atomic and whose body makes only calls that
// inline (docs/design.md, "Memory ordering": under qemu user emulation
// such a loop can keep its P for ever at GOMAXPROCS=1, and the test then
// hangs). Such a wait calls runtime.Gosched on each turn.
func TestNoCallFreeSpinWaits(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root %s: %v", root, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if loop, ok := n.(*ast.ForStmt); ok && loop.Cond != nil && readsAtomic(loop.Cond) && callFree(loop) {
				t.Errorf("%s: a spin-wait without a call that can be preempted; call runtime.Gosched() in it", fs.Position(loop.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("scanned %d test files under %s; the walk missed the repository", files, root)
	}
}

func readsAtomic(cond ast.Expr) bool {
	found := false
	ast.Inspect(cond, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Load" {
				found = true
			}
		}
		return true
	})
	return found
}

// callFree reports whether loop (condition and body) makes no call
// outside cheapCalls and never blocks (no channel operation, select,
// closure, branch out or return).
func callFree(loop *ast.ForStmt) bool {
	free := true
	ast.Inspect(loop, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			name := ""
			switch fn := x.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if !cheapCalls[name] {
				free = false
			}
		case *ast.UnaryExpr:
			if x.Op == token.ARROW {
				free = false
			}
		case *ast.SelectStmt, *ast.SendStmt, *ast.FuncLit, *ast.BranchStmt, *ast.ReturnStmt:
			free = false
		}
		return true
	})
	return free
}
