package webhook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/points"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook"
	"github.com/jejakhq/jejak/internal/webhook/webhooktest"
)

// TestCatalogExamplesAndPublishedPayloadsMatchTheirSchemas: every example
// fits its type's schema, and so do the payloads really published when a
// project is created and deleted, the plan changes, a member's role
// changes and a points.award job runs; a payload that breaks a schema is
// refused by the check.
func TestCatalogExamplesAndPublishedPayloadsMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	for _, e := range webhook.Catalog {
		if err := webhooktest.ConformsTo(e.Schema, []byte(e.Example)); err != nil {
			t.Errorf("%s example: %v", e.Type, err)
		}
	}
	// The check itself refuses what breaks a schema.
	for _, bad := range []string{`{"project_id":"7","actor_user_id":1,"name":"x"}`, `{"project_id":7,"name":"x"}`, `[]`} {
		if webhooktest.Conforms("project.created", []byte(bad)) == nil {
			t.Errorf("project.created accepted %s", bad)
		}
	}
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	var tid, budi, rina int64
	if err := db.Admin.QueryRow(ctx, `SELECT t.id, (SELECT id FROM users WHERE email = 'budi@melati.test'),
		(SELECT id FROM users WHERE email = 'rina@melati.test') FROM tenants t WHERE slug = 'toko-bunga-melati'`).Scan(&tid, &budi, &rina); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, "DELETE FROM outbox_messages"); err != nil {
		t.Fatal(err)
	}
	svc := tenant.NewService(db.App, db.System, nil)
	owner := tenant.Actor{UserID: budi, Role: "owner", TraceID: "catalog"}
	p, err := svc.CreateProject(ctx, tid, owner, "Katalog Skema")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.DeleteProject(ctx, tid, owner, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.ChangePlan(ctx, tid, owner, "free"); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetMembership(ctx, tid, owner, rina, "admin"); err != nil {
		t.Fatal(err)
	}
	award := &points.Handler{App: db.App, Service: points.NewService(nil)}
	if err := award.Handle(ctx, &job.Job{ID: 1, TenantID: tid, Kind: points.Kind, Attempt: 1, MaxAttempts: 3,
		Payload: []byte(fmt.Sprintf(`{"tenant_id":%d,"message_id":"m-1","customer":"c@x.test","points":5,"reason":"order"}`, tid))}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Admin.Query(ctx, "SELECT event_type, payload::text FROM outbox_messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var typ, payload string
		if err := rows.Scan(&typ, &payload); err != nil {
			t.Fatal(err)
		}
		seen[typ] = true
		if err := webhooktest.Conforms(typ, []byte(payload)); err != nil {
			t.Errorf("published %s: %v", typ, err)
		}
	}
	for _, typ := range []string{"project.created", "project.deleted", "plan.changed", "membership.changed", "points.awarded"} {
		if !seen[typ] {
			t.Errorf("no %s was published", typ)
		}
	}
}

// TestPruneHoursKeepsTwoDays: the tallies behind the success rate older
// than two days are deleted, newer ones kept.
func TestPruneHoursKeepsTwoDays(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	v.clk.Set(v.clk.Now().Truncate(time.Hour).Add(30 * time.Minute))
	c, err := v.svc.Create(ctx, v.tenant, v.owner, "https://hooks.example/x", "*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.Admin.Exec(ctx, `INSERT INTO webhook_endpoint_hours (tenant_id, endpoint_id, hour, succeeded, failed)
		SELECT $1, $2, date_trunc('hour', $3::timestamptz) - make_interval(hours => h), 1, 0 FROM generate_series(0, 71) h`,
		v.tenant, c.Endpoint.ID, *v.clk.Now()); err != nil {
		t.Fatal(err)
	}
	n, err := webhook.PruneHours(ctx, v.db.System, v.clk)
	if err != nil || n != 24 {
		t.Fatalf("pruned %d (%v), want the 24 hours that started more than 48 h ago", n, err)
	}
	if left := v.count(t, "SELECT count(*) FROM webhook_endpoint_hours"); left != 48 {
		t.Fatalf("%d hours left, want 48", left)
	}
}
