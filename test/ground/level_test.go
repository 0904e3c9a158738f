package ground

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// groundPackages hold the tests that run on a real-node or kwok ground: each has a level.
var groundPackages = []string{"test/e2e", "test/chaos", "test/deploy", "test/helm", "test/olm", "test/localcluster", "test/bench/scale"}

// TestEveryGroundTestNamesItsLevelFirst: a test without a level would run in both targets
// unchecked (no after-test check on the shared ground), so each one's first statement is
// ground.Level(t, …).
func TestEveryGroundTestNamesItsLevelFirst(t *testing.T) {
	seen := 0
	for _, dir := range groundPackages {
		files, err := filepath.Glob(filepath.Join(RepoRoot(), dir, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no test files in %s (%v)", dir, err)
		}
		for _, f := range files {
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
					continue
				}
				seen++
				if !startsWithLevel(fn) {
					t.Errorf("%s: %s does not begin with ground.Level(t, ground.Core|Full)", filepath.Join(dir, filepath.Base(f)), fn.Name.Name)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found %d ground tests: the packages moved?", seen)
	}
}

func startsWithLevel(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Level" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || pkg.Name != "ground" {
		return false
	}
	lvl, ok := call.Args[1].(*ast.SelectorExpr)
	return ok && (lvl.Sel.Name == "Core" || lvl.Sel.Name == "Full")
}

// fakeT records what Level does to a test.
type fakeT struct {
	skipped, fatal bool
	logs           []string
	cleanups       int
}

func (f *fakeT) Helper()                         {}
func (f *fakeT) Name() string                    { return "TestFake" }
func (f *fakeT) Logf(format string, args ...any) { f.logs = append(f.logs, format) }
func (f *fakeT) Errorf(string, ...any)           {}
func (f *fakeT) Skipf(string, ...any)            { f.skipped = true }
func (f *fakeT) Fatalf(string, ...any)           { f.fatal = true }
func (f *fakeT) Cleanup(func())                  { f.cleanups++ }

func TestLevelSkipsFullTestsOnlyInACoreRun(t *testing.T) {
	for _, c := range []struct {
		env        string
		level      TestLevel
		skip, fail bool
	}{
		{"core", Core, false, false},
		{"core", Full, true, false},
		{"all", Full, false, false},
		{"", Full, false, false},
		{"fast", Core, false, true},
	} {
		t.Setenv(EnvLevel, c.env)
		f := &fakeT{}
		Level(f, c.level)
		if f.skipped != c.skip || f.fatal != c.fail {
			t.Errorf("%s=%q, level %s: skipped %v, failed %v", EnvLevel, c.env, c.level, f.skipped, f.fatal)
		}
		if Runs(c.level) == c.skip && !c.fail {
			t.Errorf("%s=%q: Runs(%s) = %v", EnvLevel, c.env, c.level, Runs(c.level))
		}
	}
}
