package grudge_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
)

// audit56: the code blocks of the package docs (tab-indented lines of a
// doc.go's comment that look like Go) type-check against the current API
// as function bodies. Free variables (a lowercase name the block does not
// declare: mux, addr, key, ...) are not errors; a qualified name that does
// not exist (limit.Foo), a wrong argument count or a wrong result count
// (l := f() for a two-result f) are.

var a56Qualified = regexp.MustCompile(`\b(grudge|grudgetest|sketch|sketchtest|rotator|limit|httplimit|meter|snapshot|decay|reference|limittest)\.[A-Z]`)

func a56DocBlocks(t *testing.T, file string) []string {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n"))
		}
		cur = nil
	}
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\t") {
			cur = append(cur, strings.TrimPrefix(line, "//\t"))
			continue
		}
		flush()
	}
	flush()
	var goBlocks []string
	for _, b := range blocks {
		if a56Qualified.MatchString(b) && (strings.Contains(b, ":=") || strings.Contains(b, "(")) {
			goBlocks = append(goBlocks, b)
		}
	}
	return goBlocks
}

func TestAudit56PackageDocSnippetsTypeCheck(t *testing.T) {
	// It type-checks snippets (go/importer parses in goroutines of its
	// own, none of this module's code runs concurrently): the race
	// detector has nothing of ours to watch. make test's purego step runs
	// it (about 10 s; 80 s under -race beside the other packages).
	if testing.Short() || testsize.Race {
		t.Skip("type-checks its imports from source: make test's purego step runs it (not -short, not -race)")
	}
	root, _ := filepath.Abs(".")
	var files []string
	filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "doc.go" && !strings.Contains(p, "testdata") {
			files = append(files, p)
		}
		return nil
	})
	imports := map[string]string{
		"grudge": "github.com/lfgrudge/grudge", "grudgetest": "github.com/lfgrudge/grudge/grudgetest",
		"sketch": "github.com/lfgrudge/grudge/sketch", "sketchtest": "github.com/lfgrudge/grudge/sketch/sketchtest",
		"rotator": "github.com/lfgrudge/grudge/rotator", "limit": "github.com/lfgrudge/grudge/limit",
		"httplimit": "github.com/lfgrudge/grudge/limit/httplimit", "meter": "github.com/lfgrudge/grudge/meter",
		"snapshot": "github.com/lfgrudge/grudge/sketch/snapshot", "decay": "github.com/lfgrudge/grudge/decay",
		"reference": "github.com/lfgrudge/grudge/sketch/reference", "limittest": "github.com/lfgrudge/grudge/limit/limittest",
		"time": "time", "http": "net/http", "context": "context", "errors": "errors", "fmt": "fmt", "log": "log",
		"expvar": "expvar", "os": "os",
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	checked := 0
	for _, f := range files {
		if strings.HasPrefix(f, "redis") || strings.HasPrefix(f, "tests") || strings.HasPrefix(f, "bench") || strings.HasPrefix(f, "examples") {
			continue // other modules
		}
		for i, b := range a56DocBlocks(t, f) {
			var src strings.Builder
			src.WriteString("package p\n\nimport (\n")
			for name, path := range imports {
				src.WriteString("\t" + name + " \"" + path + "\"\n")
			}
			src.WriteString(")\n\nfunc _() {\n")
			// statements only: a block of declarations (func ...) is kept at top level
			body := b
			top := ""
			if strings.HasPrefix(strings.TrimSpace(b), "func ") || strings.HasPrefix(strings.TrimSpace(b), "type ") || strings.HasPrefix(strings.TrimSpace(b), "var ") {
				top, body = b, ""
			}
			src.WriteString(body + "\n}\n" + top + "\n")
			name := filepath.Join(root, "a56_"+strings.ReplaceAll(f, "/", "_")+"_"+strings.Repeat("x", i)+".go")
			file, err := parser.ParseFile(fset, name, src.String(), parser.SkipObjectResolution)
			if err != nil {
				t.Logf("%s block %d is not Go (%v):\n%s", f, i+1, err, b)
				continue
			}
			conf := types.Config{Importer: imp.(types.ImporterFrom), Error: func(error) {}}
			var errs []string
			conf.Error = func(err error) {
				msg := err.(types.Error).Msg
				switch {
				case strings.HasPrefix(msg, "undefined: ") && !strings.Contains(msg, "."):
				case strings.Contains(msg, "imported and not used"), strings.Contains(msg, "declared and not used"):
				case strings.Contains(msg, "missing return"):
				default:
					errs = append(errs, msg)
				}
			}
			conf.Check("p", fset, []*ast.File{file}, nil)
			checked++
			if f == "decay/doc.go" && strings.Contains(b, "decay.Apply(cell.score") {
				// "# Pseudo-code of a lazy read": decay is the cell's law
				// there (a Decay value), not the package.
				continue
			}
			if len(errs) > 0 {
				t.Errorf("%s, code block %d does not type-check: %s\n%s", f, i+1, strings.Join(errs, "; "), b)
			}
		}
	}
	t.Logf("%d package-doc code blocks type-checked", checked)
	if checked == 0 {
		t.Fatal("no blocks found")
	}
}
