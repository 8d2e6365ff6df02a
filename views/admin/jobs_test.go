package admin_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/golden"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/admin"
)

// TestJobsResultsGolden: the staff job list renders byte for byte as
// recorded in testdata, in both languages: every state, a dead letter with
// its class and flag, a job without a trace or a finish, an unknown tenant,
// and text that must be escaped (recorded from the templ loop the
// hand-written rows replaced; -update-golden rewrites them).
func TestJobsResultsGolden(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	vm := admin.JobsVM{Tenants: admin.TenantMap([]admin.Tenant{{ID: 1, Slug: "toko-bunga-melati", Name: "Toko Bunga Melati"}}),
		NextURL: "/admin/jobs?before=1000&state=dead", SearchedFrom: "2026-12-01"}
	for i, st := range []string{"pending", "running", "succeeded", "dead", "cancelled", "dead"} {
		r := admin.JobRow{ID: int64(1000 + i), TenantID: 1, Kind: "email.weekly-report", Queue: "default", State: st,
			Attempt: i, MaxAttempts: 1200, CreatedAt: now.Add(-time.Duration(i) * time.Hour), FinishedAt: &now,
			LastError: `smtp 550 <mailbox> "unavailable" & ` + strings.Repeat("é", 90), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
		switch i {
		case 3:
			r.Class, r.Flagged = "transient", true
		case 5:
			r.Class, r.TenantID, r.TraceID, r.FinishedAt, r.Kind = "", 99, "", nil, `odd"<kind>`
		}
		vm.Rows = append(vm.Rows, r)
	}
	for _, lang := range []string{"en", "id"} {
		var b strings.Builder
		if err := admin.JobsResults(vm).Render(i18n.WithLang(context.Background(), lang), &b); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "jobs_"+lang+".golden"), b.String())
	}
}
