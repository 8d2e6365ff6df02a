package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestHomeListsOnePageOfProjects: however many projects a tenant has, the
// home page lists the newest 50 and links to the older ones, which list
// the rest; a bad cursor is a 400.
func TestHomeListsOnePageOfProjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati := f.tenantID("toko-bunga-melati")
	if _, err := f.db.Admin.Exec(context.Background(), `INSERT INTO projects (tenant_id, name)
		SELECT $1, 'Bulk ' || g FROM generate_series(1, 120) g`, melati); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM projects WHERE tenant_id = $1`, melati).Scan(&total); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("budi@melati.test")
	item := regexp.MustCompile(`data-testid="project" `)
	older := regexp.MustCompile(`href="(/t/toko-bunga-melati/\?before=\d+#projects)" data-testid="older-projects"`)
	seen, path := 0, "/t/toko-bunga-melati/"
	for pages := 1; ; pages++ {
		a := c.get(path)
		if a.status != 200 {
			t.Fatalf("GET %s: %d", path, a.status)
		}
		n := len(item.FindAllString(a.body, -1))
		if n > 50 || n == 0 {
			t.Fatalf("page %d lists %d projects, want 1 to 50", pages, n)
		}
		if !strings.Contains(a.body, "Bulk 120") && pages == 1 {
			t.Fatal("the first page does not start with the newest project")
		}
		seen += n
		m := older.FindStringSubmatch(a.body)
		if m == nil {
			break
		}
		path = m[1][:strings.Index(m[1], "#")]
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if seen != total {
		t.Fatalf("the pages listed %d projects, the tenant has %d", seen, total)
	}
	if a := c.get("/t/toko-bunga-melati/?before=abc"); a.status != 400 {
		t.Fatalf("bad cursor: %d, want 400", a.status)
	}
}
