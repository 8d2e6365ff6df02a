package web_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tenant"
)

// TestStrangerReadsNothingThroughRLS calls the services behind the tenant
// pages directly, as a handler whose membership check was removed would:
// signed in as the owner of another tenant, aimed at Toko Bunga Melati.
// Row-level security alone (the signed-in user's membership) returns
// nothing of the home page's projects, the jobs list, the trail or the CSV
// export; the same calls as Melati's owner return data, so the emptiness
// is RLS, not an empty tenant.
func TestStrangerReadsNothingThroughRLS(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati := f.tenantID("toko-bunga-melati")
	owner := f.client()
	owner.login("budi@melati.test")
	owner.post("/t/toko-bunga-melati/projects", owner.withCSRF(map[string][]string{"name": {"Rahasia"}}), false)
	f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "points.award"})
	f.seal() // the export holds the sealed log

	tenants := tenant.NewService(f.db.App, f.db.System, nil)
	trail := audit.NewService(f.db.App, f.db.System)
	jobs := console.New(console.Config{App: f.db.App, System: f.db.System, Tenants: tenants, Audit: trail})
	as := func(email string) context.Context {
		return reqctx.WithViewer(context.Background(), &reqctx.Viewer{UserID: f.userID(email)})
	}
	read := func(ctx context.Context) (projects, events, jobRows int, export string) {
		t.Helper()
		ps, _, err := tenants.Home(ctx, melati, 0)
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("home: %v", err)
		}
		tl, err := trail.Timeline(ctx, melati, audit.Filter{}, 0, 50, false)
		if err != nil {
			t.Fatalf("timeline: %v", err)
		}
		page, err := jobs.TenantJobs(ctx, melati, "", 0)
		if err != nil {
			t.Fatalf("jobs: %v", err)
		}
		var buf bytes.Buffer
		if err := trail.Export(ctx, melati, reqctx.ViewerFrom(ctx).UserID, "csv", audit.Filter{}, &buf); err != nil {
			t.Fatalf("export: %v", err)
		}
		return len(ps.Rows), len(tl.Rows), len(page.Rows), buf.String()
	}

	p, e, j, csv := read(as("budi@melati.test"))
	if p == 0 || e == 0 || j == 0 || strings.Count(csv, "\n") < 3 {
		t.Fatalf("owner reads projects=%d events=%d jobs=%d export lines=%d; the fixture should have data",
			p, e, j, strings.Count(csv, "\n"))
	}
	p, e, j, csv = read(as("sari@senja.test"))
	if p != 0 || e != 0 || j != 0 {
		t.Fatalf("stranger reads projects=%d events=%d jobs=%d of another tenant", p, e, j)
	}
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "#trailer,0,") {
		t.Fatalf("stranger's export is not empty: %q", csv)
	}
}
