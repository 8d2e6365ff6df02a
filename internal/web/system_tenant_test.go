package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/webhook"
)

// TestSystemTenantIsHidden: the reserved tenant of staff notifications has
// no pages (404 for owners and staff alike), is in no staff tenant list or
// picker and in no per-tenant figure, even when it has jobs of its own.
func TestSystemTenantIsHidden(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	sys := f.tenantID("jejak-system")
	// One of its webhook deliveries waiting, as a staff alert would leave.
	err := database.InTx(ctx, f.db.System, func(tx pgx.Tx) error {
		_, err := f.jobs.Enqueue(ctx, tx, job.EnqueueParams{TenantID: sys, Kind: "test.system", Payload: json.RawMessage(`{}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "test.customer"})

	adm, owner := f.client(), f.client()
	adm.login("admin@jejak.test")
	owner.login("budi@melati.test")
	for _, c := range []*client{adm, owner} {
		for _, path := range []string{"/t/jejak-system/", "/t/jejak-system/audit", "/t/jejak-system/jobs", "/t/jejak-system/webhooks"} {
			if a := c.get(path); a.status != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", path, a.status)
			}
		}
	}
	if a := owner.get("/t/toko-bunga-melati/"); a.status != http.StatusOK || strings.Contains(a.body, "jejak-system") {
		t.Fatalf("owner home: %d, or it names the system tenant", a.status)
	}
	if a := adm.get("/admin/tenants/jejak-system"); a.status != http.StatusNotFound {
		t.Fatalf("staff page of the system tenant: %d, want 404", a.status)
	}
	for _, path := range []string{"/admin/tenants", "/admin/tenants?q=jejak", "/admin/tenants?q=system"} {
		if a := adm.get(path); a.status != http.StatusOK || strings.Contains(a.body, "jejak-system") {
			t.Fatalf("GET %s: %d, or it lists the system tenant", path, a.status)
		}
	}
	if a := adm.get("/admin/tenants"); !strings.Contains(a.body, "toko-bunga-melati") {
		t.Fatal("the staff tenant list lost the customer tenants")
	}
	for _, path := range []string{"/admin/jobs", "/admin/dead"} {
		if a := adm.get(path); a.status != http.StatusOK || strings.Contains(a.body, `<option value="jejak-system"`) {
			t.Fatalf("GET %s: %d, or its tenant picker offers the system tenant", path, a.status)
		}
	}
	home := adm.get("/admin")
	byTenant := section(home.body, `data-testid="by-tenant"`, "</table>")
	if !strings.Contains(byTenant, "toko-bunga-melati") || strings.Contains(byTenant, "jejak-system") {
		t.Fatalf("per-tenant figures: %s", byTenant)
	}
	if kinds := section(home.body, `data-testid="by-kind"`, "</table>"); !strings.Contains(kinds, "test.system") {
		t.Fatal("the system tenant's job is missing from the per-kind figures")
	}
}

// TestAdminAlertsStaffWebhookPanel: with a staff webhook configured and no
// secret given, /admin/alerts shows the generated secret and, per
// transition, how far its notification got (here: queued in the outbox).
func TestAdminAlertsStaffWebhookPanel(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	c := f.client()
	c.login("admin@jejak.test")
	if a := c.get("/admin/alerts"); !strings.Contains(a.body, "JEJAK_ALERT_WEBHOOK_URL") {
		t.Fatal("no hint how to configure the staff webhook")
	}
	ep, err := webhook.SyncSystemEndpoint(ctx, f.db.System, nil, webhook.SystemConfig{URL: "https://ops.example.test/hooks",
		Events: []string{alert.EventType}})
	if err != nil || !ep.Configured {
		t.Fatalf("sync: %+v %v", ep, err)
	}
	rules := alert.DefaultRules(alert.Sources{})
	for i := range rules {
		if rules[i].Name == alert.RuleDeadLetters {
			rules[i].For = 0
			rules[i].Eval = func(context.Context, alert.Reader, time.Time) (float64, string, error) { return 5, "5 dead", nil }
		}
	}
	ev := alert.New(alert.Config{Pool: f.db.System, Logger: quietLog(), Rules: rules,
		OnTransition: alert.NewNotifier(ep.TenantID, nil).Hook()})
	if _, err := ev.EvaluateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	page := c.get("/admin/alerts")
	panel := section(page.body, `data-testid="alert-webhook"`, "</section>")
	if !strings.Contains(panel, "https://ops.example.test/hooks") || !strings.Contains(panel, `data-testid="alert-webhook-secret">whsec_`) {
		t.Fatalf("staff webhook panel: %s", panel)
	}
	if n := strings.Count(page.body, `data-testid="alert-notice" data-notice="pending">queued in the outbox`); n != 2 {
		t.Fatalf("%d transitions show their queued notification, want 2 (pending, firing)", n)
	}
}
