package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/job"
)

// TestAdminJobListUnindexedFilterSaysWhatItSearched: a kind filter
// without a tenant searches one window of job ids per page; when the
// window holds no match the page says which ids it searched and "older"
// continues below them, down to the old job that matches.
func TestAdminJobListUnindexedFilterSaysWhatItSearched(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	old := f.enqueue("kopi-senja", job.EnqueueParams{Kind: "rare.kind"})
	// Newer jobs start 50,000 ids later: more than one default window.
	if _, err := f.db.Admin.Exec(context.Background(), "ALTER TABLE jobs ALTER COLUMN id RESTART WITH 50000"); err != nil {
		t.Fatal(err)
	}
	f.enqueue("kopi-senja", job.EnqueueParams{})
	c := f.client()
	c.login("support@jejak.test")
	page := c.get("/admin/jobs?kind=rare.kind")
	for hops := 0; !has(jobIDsIn(page.body, "job-row"), old); hops++ {
		m := regexpOlder.FindStringSubmatch(page.body)
		if page.status != 200 || m == nil || !strings.Contains(page.body, `data-testid="searched-from"`) || hops > 3 {
			t.Fatalf("hop %d: status %d, older link %v, body %.500s", hops, page.status, m != nil, page.body)
		}
		page = c.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	}
	if strings.Contains(page.body, `data-testid="searched-from"`) {
		t.Fatalf("the page that reached the oldest ids still says it searched a window")
	}
}
