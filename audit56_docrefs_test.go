package grudge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// audit56: every `pkg.Name` (and `pkg.Name.Member`) the docs write in
// backquotes, for a package of this repository, names something that
// exists in that package's non-test sources.

type a56Pkg struct {
	names   map[string]bool            // top-level exported names
	members map[string]map[string]bool // type -> methods and fields
}

func a56Packages(t *testing.T) map[string][]*a56Pkg {
	t.Helper()
	pkgs := map[string][]*a56Pkg{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if strings.Contains(path, "testdata") || strings.HasPrefix(filepath.Base(path), ".") && path != "." {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		ents, _ := os.ReadDir(path)
		byName := map[string]*a56Pkg{}
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(path, n), nil, parser.SkipObjectResolution)
			if err != nil {
				continue
			}
			p := byName[f.Name.Name]
			if p == nil {
				p = &a56Pkg{names: map[string]bool{}, members: map[string]map[string]bool{}}
				byName[f.Name.Name] = p
			}
			add := func(typ, m string) {
				if p.members[typ] == nil {
					p.members[typ] = map[string]bool{}
				}
				p.members[typ][m] = true
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						p.names[d.Name.Name] = true
						continue
					}
					rt := d.Recv.List[0].Type
					for {
						switch x := rt.(type) {
						case *ast.StarExpr:
							rt = x.X
							continue
						case *ast.IndexExpr:
							rt = x.X
							continue
						case *ast.IndexListExpr:
							rt = x.X
							continue
						}
						break
					}
					if id, ok := rt.(*ast.Ident); ok {
						add(id.Name, d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							p.names[s.Name.Name] = true
							var fields *ast.FieldList
							switch tt := s.Type.(type) {
							case *ast.StructType:
								fields = tt.Fields
							case *ast.InterfaceType:
								fields = tt.Methods
							}
							if fields != nil {
								for _, fl := range fields.List {
									for _, nm := range fl.Names {
										add(s.Name.Name, nm.Name)
									}
									if len(fl.Names) == 0 { // embedded
										et := fl.Type
										if st, ok := et.(*ast.StarExpr); ok {
											et = st.X
										}
										switch e := et.(type) {
										case *ast.Ident:
											add(s.Name.Name, e.Name)
										case *ast.SelectorExpr:
											add(s.Name.Name, e.Sel.Name)
										}
									}
								}
							}
						case *ast.ValueSpec:
							for _, nm := range s.Names {
								p.names[nm.Name] = true
							}
						}
					}
				}
			}
		}
		for n, p := range byName {
			pkgs[n] = append(pkgs[n], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

var a56Backquote = regexp.MustCompile("`[^`\n]+`")
var a56Ref = regexp.MustCompile(`(?:^|[^\w.])([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)

// a56Misses returns, for each doc, the backquoted pkg.Name references
// of this repository's packages that name nothing.
func a56Misses(t *testing.T) []string {
	pkgs := a56Packages(t)
	// Names a package doc may use for another package (grudge is the root).
	docs, _ := filepath.Glob("docs/*.md")
	docs = append(docs, "README.md")
	var misses []string
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, span := range a56Backquote.FindAllString(line, -1) {
				for _, m := range a56Ref.FindAllStringSubmatch(span, -1) {
					pk, name, mem := m[1], m[2], m[3]
					cands := pkgs[pk]
					if len(cands) == 0 {
						continue // not a package of this repository
					}
					found, memFound := false, mem == ""
					for _, p := range cands {
						if p.names[name] {
							found = true
							if mem != "" && p.members[name][mem] {
								memFound = true
							}
						}
					}
					if !found || !memFound {
						misses = append(misses, doc+":"+strconv.Itoa(i+1)+": "+span)
					}
				}
			}
		}
	}
	sort.Strings(misses)
	return misses
}

// a56Allowed are the misses that are not claims about the current API:
// the go-redis client types (package redis of github.com/redis/go-redis,
// not this repository's redis module), a test function, the "what moved"
// tables' old names (migrating.md), and method shorthands written as
// pkg.Method (`sketch.TryUpdate`, `limit.WaitN`, `sketch.Merge(nil)`,
// `decay.Linear.Apply`: a method of the value a constructor returns).
var a56Allowed = map[string]bool{
	"README.md: `redis.UniversalClient`":                             true,
	"docs/distributed.md: `*redis.Client`":                           true,
	"docs/distributed.md: `*redis.ClusterClient`":                    true,
	"docs/distributed.md: `redis.UniversalClient`":                   true,
	"docs/distributed.md: `*redis.Ring`":                             true,
	"docs/migrating.md: `redis.UniversalClient`":                     true,
	"docs/design.md: `tests.TestConsumerModules`":                    true,
	"docs/design.md: `decay.Compiled`":                               true,
	"docs/design.md: `decay.Compiled.ExpFast`":                       true,
	"docs/migrating.md: `asm.Prefetch`":                              true,
	"docs/migrating.md: `atomiccell.ContentionBackoff`":              true,
	"docs/migrating.md: `decay.Compiled`":                            true,
	"docs/migrating.md: `decay.Kind`":                                true,
	"docs/migrating.md: `rotator.Refund`":                            true,
	"docs/migrating.md: `sketch.Index`":                              true,
	"docs/migrating.md: `sketch.Sketch.QueryDetailedAt`":             true,
	"docs/migrating.md: `sketch.Sketch.Hash`":                        true,
	"docs/migrating.md: `sketch.Sketch.MergeWithin(other, overlap)`": true,
	"docs/migrating.md: `sketch.Decode(data, cfg)`":                  true,
	"docs/migrating.md: `sketch.Config.Normalize`":                   true,
	"docs/migrating.md: `rotator.Config.Manual`":                     true,
	"docs/migrating.md: `rotator.GenerationSeed`":                    true,
	"docs/migrating.md: `rotator.Rotator.TryReserveAt`":              true,
	"docs/migrating.md: `atomiccell.Rules.ValueN`":                   true,
	"docs/migrating.md: `decay.Compile`":                             true,
	"docs/migrating.md: `asm.Ticks`":                                 true,
	"docs/migrating.md: `meter.Rate.Rate([]byte)`":                   true,
	"docs/migrating.md: `meter.Rate.ObserveAndRate(key)`":            true,
	"docs/migrating.md: `meter.Novelty.Threshold()`":                 true,
	"docs/migrating.md: `meter.New*`":                                true,
	"docs/migrating.md: `sketch.TryUpdate`":                          true,
	"docs/migrating.md: `limit.WaitN`":                               true,
	"docs/migrating.md: `sketch.Merge(nil)`":                         true,
	"docs/precision.md: `decay.Linear.Apply`":                        true,
}

func TestAudit56DocIdentifiersExist(t *testing.T) {
	for _, m := range a56Misses(t) {
		key := m[:strings.Index(m, ":")] + m[strings.Index(m, ": "):]
		if !a56Allowed[key] {
			t.Errorf("%s names nothing in this repository's packages", m)
		}
	}
}
