package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestAdminOutboxShowsFailedAndRetriesWithReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.db.Admin.Exec(context.Background(), `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload,
		created_at, available_at, state, attempts, last_error)
		SELECT id, 'project.deleted', 'project', '77', '{}'::jsonb, now() - interval '5 minutes', now(), 'failed', 5, 'nats: <timeout>'
		  FROM tenants WHERE slug = 'kopi-senja'
		UNION ALL
		SELECT id, 'project.created', 'project', '78', '{}'::jsonb, now() - interval '3 minutes', now(), 'pending', 0, NULL
		  FROM tenants WHERE slug = 'kopi-senja'`)
	if err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("admin@jejak.test")
	a := c.get("/admin/outbox")
	if a.status != http.StatusOK || !strings.Contains(a.body, `data-testid="outbox-failed-row"`) ||
		!strings.Contains(a.body, "nats: &lt;timeout&gt;") || !strings.Contains(a.body, `data-late="true"`) ||
		!strings.Contains(a.body, `data-testid="throughput-chart"`) {
		t.Fatalf("outbox page: %d %.3000s", a.status, a.body)
	}
	live := c.get("/admin/outbox?partial=live")
	if live.status != http.StatusOK || !strings.Contains(live.body, `id="outbox-live"`) || strings.Contains(live.body, "<html") {
		t.Fatalf("live partial: %d", live.status)
	}
	if a := c.post("/admin/outbox/retry", c.withCSRF(url.Values{"reason": {" "}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("retry without reason: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM outbox_messages WHERE state = 'failed'`); n != 1 {
		t.Fatal("a refused retry changed something")
	}
	a = c.post("/admin/outbox/retry", c.withCSRF(url.Values{"reason": {"NATS restarted"}, "tenant": {"kopi-senja"}}), false)
	if a.status != http.StatusSeeOther {
		t.Fatalf("retry: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM outbox_messages WHERE state = 'failed'`); n != 0 {
		t.Fatal("failed message not retried")
	}
	if n := f.count(`SELECT count(*) FROM audit_events a JOIN tenants t ON t.id = a.tenant_id JOIN users u ON u.id = a.actor_id
		WHERE t.slug = 'kopi-senja' AND a.action = 'outbox.retry' AND a.actor_kind = 'staff' AND u.email = 'admin@jejak.test'
		AND a.detail->>'reason' = 'NATS restarted'`); n != 1 {
		t.Fatalf("%d audit events for the retry", n)
	}
}
