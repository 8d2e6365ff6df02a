// Package shape holds the test that keeps the code base's layering (see
// docs/architecture.md): handlers reach data only through services, views
// import no domain package, and only a domain's store file sees sqlc.
package shape

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/jejakhq/jejak"

// domains are the packages that own data or wire it. Views never import
// them: they define flat rows of strings instead. A package that talks to
// the database counts as a domain too, whatever its name (see
// databasePackages).
var domains = []string{
	"job", "console", "audit", "tenant", "billing", "points", "mail", "user", "outbox",
	"payment", "approval", "kinds", "demo", "database", "queries", "app", "web",
	"webhook", "outboxconsole", "natsbus",
}

// file is one non-test, non-generated-by-sqlc Go file and its imports.
type file struct {
	rel     string // path from the repository root, slash-separated
	imports []string
}

// repoFiles parses the imports of every non-test Go file below root/dir.
func repoFiles(t *testing.T, root, dir string) []file {
	t.Helper()
	var out []file
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fl := file{rel: filepath.ToSlash(rel)}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			fl.imports = append(fl.imports, p)
		}
		out = append(out, fl)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		t.Fatal("go.mod not found above the test")
	}
}

func isPgx(p string) bool {
	return p == "github.com/jackc/pgx/v5" || strings.HasPrefix(p, "github.com/jackc/pgx/")
}

// databasePackages are the internal packages that import pgx, the
// database helpers or sqlc's queries: domains by what they do.
func databasePackages(t *testing.T, root string) map[string]bool {
	out := map[string]bool{}
	for _, f := range repoFiles(t, root, "internal") {
		for _, imp := range f.imports {
			if isPgx(imp) || imp == module+"/internal/database" || imp == module+"/internal/queries" {
				out[module+"/"+filepath.ToSlash(filepath.Dir(f.rel))] = true
			}
		}
	}
	return out
}

// TestWebReachesDataOnlyThroughServices: a handler cannot open a
// transaction or pick a pool, so it cannot forget to set the tenant.
func TestWebReachesDataOnlyThroughServices(t *testing.T) {
	t.Parallel()
	for _, f := range repoFiles(t, repoRoot(t), "internal/web") {
		for _, imp := range f.imports {
			if isPgx(imp) || imp == module+"/internal/database" || imp == module+"/internal/queries" {
				t.Errorf("%s imports %s: handlers call a service method, which opens its own transaction", f.rel, imp)
			}
		}
	}
}

// TestViewsImportNoDomain: views print flat rows of strings that the
// handlers fill; they never see domain types.
func TestViewsImportNoDomain(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	banned := databasePackages(t, root)
	for _, d := range domains {
		banned[module+"/internal/"+d] = true
	}
	for _, f := range repoFiles(t, root, "views") {
		for _, imp := range f.imports {
			if banned[imp] || isPgx(imp) {
				t.Errorf("%s imports %s: views define their own flat rows; map domain values in the handler", f.rel, imp)
			}
		}
	}
}

// TestOnlyStoresSeeSQLC: sqlc's row types stay behind each domain's store
// file, which converts them into the domain's types.
func TestOnlyStoresSeeSQLC(t *testing.T) {
	t.Parallel()
	for _, f := range repoFiles(t, repoRoot(t), "internal") {
		if strings.HasPrefix(f.rel, "internal/queries/") {
			continue
		}
		base := filepath.Base(f.rel)
		for _, imp := range f.imports {
			if imp == module+"/internal/queries" && base != "store.go" && !strings.HasSuffix(base, "_store.go") {
				t.Errorf("%s imports internal/queries: only a domain's store.go converts sqlc rows", f.rel)
			}
		}
	}
}
