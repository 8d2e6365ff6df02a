package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestIncidentShowsOutboxAndDeliveries: a request with a traceparent
// creates a project, which publishes project.created to the outbox in the
// same transaction; the message carries the trace, its webhook delivery
// hangs off the message, and the incident page shows both.
func TestIncidentShowsOutboxAndDeliveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const trace = "5ce0e9a56015fec5aadfa328ae398115"
	endpoint, _ := f.webhookWithDelivery("toko-bunga-melati")
	owner := f.client()
	owner.login("budi@melati.test")
	form := owner.withCSRF(url.Values{"name": {"Kiriman"}})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/t/toko-bunga-melati/projects", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("traceparent", "00-"+trace+"-b7ad6b7169203331-01")
	if res := owner.do(req); res.status != http.StatusSeeOther {
		t.Fatalf("create project: %d", res.status)
	}
	var msg int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT message_id FROM outbox_traces WHERE trace_id = $1`, trace).Scan(&msg); err != nil {
		t.Fatalf("the outbox message of the request is not in the trace index: %v", err)
	}
	// The fan-out would create this delivery for the endpoint.
	if _, err := f.db.Admin.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, body, state, attempts, last_status, last_error, created_at, updated_at)
		SELECT tenant_id, id, $2, 'project.created', '{}', 'failed', 3, 503, 'HTTP 503', now(), now() FROM webhook_endpoints WHERE id = $1`, endpoint, msg); err != nil {
		t.Fatal(err)
	}
	staff := f.client()
	staff.login("support@jejak.test")
	page := staff.get("/admin/search?trace=" + trace)
	if page.status != http.StatusOK {
		t.Fatalf("incident page: %d", page.status)
	}
	for _, want := range []string{`data-kind="outbox"`, "project.created written to the outbox", `data-kind="delivery"`,
		"https://hooks.example.com/toko-bunga-melati", "HTTP 503", `data-action="project.create"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("incident page lacks %q", want)
		}
	}
}
