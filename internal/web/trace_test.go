package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// A trace id is the client's word (traceparent): another tenant that
// reuses one does not appear under this tenant's job, and the staff trace
// page flags a trace that spans tenants.
func TestTraceIDIsNotACrossTenantJoinKey(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	const shared = "4bf92f3577b34da6a3ce929d0e0e4736"
	const own = "00f067aa0ba902b700f067aa0ba902b7"
	id := f.enqueue("toko-bunga-melati", job.EnqueueParams{TraceID: shared})
	f.enqueue("toko-bunga-melati", job.EnqueueParams{TraceID: own})
	record := func(slug, action, trace string) {
		tid := f.tenantID(slug)
		err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) error {
			_, err := audit.NewRecorder(nil).Record(ctx, tx, audit.Event{TenantID: tid, ActorKind: audit.ActorSystem,
				Action: action, Entity: "sync", EntityID: slug, TraceID: trace})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	record("toko-bunga-melati", "melati.own", shared)
	record("kopi-senja", "senja.planted", shared)
	record("toko-bunga-melati", "melati.only", own)

	c := f.client()
	c.login("support@jejak.test")
	page := c.get(fmt.Sprintf("/admin/jobs/%d", id))
	if page.status != 200 || !strings.Contains(page.body, `data-action="melati.own"`) {
		t.Fatalf("job page: %d, own tenant's trace event missing", page.status)
	}
	if strings.Contains(page.body, "senja.planted") || strings.Contains(page.body, "kopi-senja") {
		t.Fatal("another tenant's event with the same trace id shows under this job")
	}

	search := c.get("/admin/search?trace=" + shared)
	if !contains(search.body, `data-testid="trace-spans-tenants"`, "toko-bunga-melati", "kopi-senja", `data-action="senja.planted"`) {
		t.Fatalf("cross-tenant trace not flagged with each row's tenant: %.1500s", search.body)
	}
	if one := c.get("/admin/search?trace=" + own); strings.Contains(one.body, "trace-spans-tenants") || !strings.Contains(one.body, `data-action="melati.only"`) {
		t.Fatal("a one-tenant trace is flagged or incomplete")
	}
}
