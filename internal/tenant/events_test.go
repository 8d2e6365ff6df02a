package tenant_test

import (
	"context"
	"testing"

	"github.com/jejakhq/jejak/internal/tenant"
)

// Audited changes publish their domain event in the same transaction: a
// refused change publishes nothing.
func TestAuditedChangesPublishDomainEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	owner := tenant.Actor{UserID: budi, Role: tenant.RoleOwner, TraceID: "t-ev"}
	p, err := e.svc.CreateProject(ctx, melati, owner, "Buket Valentine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateProject(ctx, melati, owner, "   "); err == nil {
		t.Fatal("blank project name accepted")
	}
	if _, err := e.svc.DeleteProject(ctx, melati, owner, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ChangePlan(ctx, melati, owner, "free"); err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.Admin.Query(ctx, `SELECT event_type, aggregate_type, aggregate_id, trace_id, requested_by FROM outbox_messages
		WHERE tenant_id = $1 ORDER BY id`, melati)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var typ, at, aid, tr string
		var by *int64
		if err := rows.Scan(&typ, &at, &aid, &tr, &by); err != nil {
			t.Fatal(err)
		}
		if tr != "t-ev" {
			t.Errorf("%s: trace %q", typ, tr)
		}
		// Its webhook deliveries are done on behalf of the owner who acted.
		if by == nil || *by != budi {
			t.Errorf("%s: requested by %v, want the owner %d", typ, by, budi)
		}
		got = append(got, typ+" "+at)
	}
	want := []string{"project.created project", "project.deleted project", "plan.changed tenant"}
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events = %v, want %v", got, want)
		}
	}
}
