package tenant_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/golden"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/tenant"
)

// TestProjectsGolden: the project panel renders byte for byte as recorded
// in testdata, for a writer and a reader, in both languages, with names
// that must be escaped in text and in attributes (recorded from the templ
// loop the hand-written rows replaced; -update-golden rewrites them).
func TestProjectsGolden(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("WIB", 7*3600)
	at := time.Date(2026, 11, 10, 7, 5, 0, 0, time.UTC)
	vm := tenant.HomeVM{Slug: "melati", Name: "Melati", CanWrite: true, Loc: loc, OlderProjectsURL: "/t/melati/?before=9&x=\"y\"",
		Projects: []tenant.Project{{ID: 12, Name: `Alpha & "Co" <b>`, CreatedAt: at}, {ID: 9, Name: "Beta's", CreatedAt: at.Add(-49 * time.Hour)},
			{ID: 3, Name: "Gamma"}}}
	reader := vm
	reader.CanWrite, reader.OlderProjectsURL, reader.ProjectsPaged = false, "", true
	for _, lang := range []string{"en", "id"} {
		ctx := reqctx.WithCSRF(i18n.WithLang(context.Background(), lang), `tok"en&`)
		var b strings.Builder
		for _, v := range []tenant.HomeVM{vm, reader} {
			if err := tenant.Projects(v).Render(ctx, &b); err != nil {
				t.Fatal(err)
			}
			b.WriteString("\n")
		}
		golden.Check(t, filepath.Join("testdata", "projects_"+lang+".golden"), b.String())
	}
}

func BenchmarkProjects(b *testing.B) {
	vm := tenant.HomeVM{Slug: "melati", CanWrite: true, Loc: time.UTC}
	for i := range 50 {
		vm.Projects = append(vm.Projects, tenant.Project{ID: int64(100 - i), Name: "bench 1-" + strings.Repeat("x", i%7),
			CreatedAt: time.Date(2026, 11, 10, 7, i, 0, 0, time.UTC)})
	}
	ctx := reqctx.WithCSRF(i18n.WithLang(context.Background(), "en"), "token")
	var sb strings.Builder
	for b.Loop() {
		sb.Reset()
		if err := tenant.Projects(vm).Render(ctx, &sb); err != nil {
			b.Fatal(err)
		}
	}
}
