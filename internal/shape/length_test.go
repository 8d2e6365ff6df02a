package shape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a hand-written function in product code may
// be, from its "func" line to its closing brace: past it a reader scrolls,
// and the steps inside deserve names of their own.
const maxFuncLines = 80

// longTables are functions that are one table of data, kept whole so its
// entries can be compared side by side.
var longTables = map[string]bool{
	"internal/alert/rules.go DefaultRules": true,
}

// TestNoFunctionLongerThanAScreen reads every hand-written Go file outside
// tests (generated sqlc and templ code excepted) and names each function
// longer than maxFuncLines.
func TestNoFunctionLongerThanAScreen(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{"cmd", "internal", "views"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "queries" {
					return filepath.SkipDir // sqlc's
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				checked++
				lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				if key := filepath.ToSlash(rel) + " " + fn.Name.Name; lines > maxFuncLines && !longTables[key] {
					t.Errorf("%s:%d: %s is %d lines (at most %d): split it where its steps have names",
						filepath.ToSlash(rel), fset.Position(fn.Pos()).Line, fn.Name.Name, lines, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The walk must have found the code base, or the test proves nothing.
	if checked < 500 {
		t.Fatalf("only %d functions read below %s: the walk missed the code", checked, root)
	}
}
