package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/webhook"
)

// webhookScene is an owner's two endpoints after one event: one whose
// receiver answers 503 (its delivery is retrying) and one that answers 200.
type webhookScene struct {
	owner         *client
	failing, fine int64
}

func newWebhookScene(t *testing.T, f *fixture) webhookScene {
	t.Helper()
	ctx := context.Background()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"down for maintenance"}`)
	}))
	t.Cleanup(down.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(up.Close)
	owner := f.client()
	owner.login("budi@melati.test")
	for _, u := range []string{down.URL + "/hook", up.URL + "/hook"} {
		if a := owner.post("/t/toko-bunga-melati/webhooks", owner.withCSRF(url.Values{"url": {u}, "events": {"*"}}), false); a.status != http.StatusOK {
			t.Fatalf("create %s: %d", u, a.status)
		}
	}
	s := webhookScene{owner: owner}
	if err := f.db.Admin.QueryRow(ctx, `SELECT min(id), max(id) FROM webhook_endpoints`).Scan(&s.failing, &s.fine); err != nil {
		t.Fatal(err)
	}
	fan := &webhook.Fanout{System: f.db.System, Jobs: f.jobs, Logger: quietLog()}
	if _, err := fan.HandleEvent(ctx, f.tenantID("toko-bunga-melati"), 1, "project.created", []byte(`{"id":"evt_1"}`), "t"); err != nil {
		t.Fatal(err)
	}
	d := &webhook.Deliverer{App: f.db.App, Jobs: f.jobs, Logger: quietLog(),
		Client: webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Client()}
	jobs, err := f.jobs.Claim(ctx, "test-worker", 10)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if err := d.Handle(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var nextAttemptWithin5s = regexp.MustCompile(`next attempt in [1-5] seconds?<`)

var successRate = regexp.MustCompile(`data-webhook-id="(\d+)"[^>]*>(?s:.*?)data-testid="success-rate">\s*([^<\s]+)`)

// TestWebhookPagesShowHealth: each endpoint shows its 24 h success rate;
// a failing delivery is "retrying" in red with its next attempt, its
// attempt shows the receiver's answer once, an excerpt and a duration;
// destructive actions are styled as such, one primary action per row.
func TestWebhookPagesShowHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newWebhookScene(t, f)
	list := s.owner.get("/t/toko-bunga-melati/webhooks")
	rates := map[string]string{}
	for _, m := range successRate.FindAllStringSubmatch(list.body, -1) {
		rates[m[1]] = m[2]
	}
	if rates[fmt.Sprint(s.failing)] != "0%" || rates[fmt.Sprint(s.fine)] != "100%" {
		t.Fatalf("success rates %v, want 0%% and 100%%", rates)
	}
	if !strings.Contains(list.body, `data-testid="event-catalog"`) || !strings.Contains(list.body, "<code>webhook.endpoint.disabled</code>") {
		t.Error("the event catalog is not on the webhooks page")
	}
	if n := strings.Count(list.body, `class="button"`); n != 2 {
		t.Fatalf("%d primary actions for 2 endpoints, want one each", n)
	}
	if n := strings.Count(list.body, `class="danger"`); n != 6 {
		t.Fatalf("%d destructive buttons for 2 endpoints, want 3 each (disable, rotate, delete)", n)
	}
	page := s.owner.get(fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", s.failing))
	row := between(page.body, `data-testid="delivery"`, `</tr>`)
	for _, want := range []string{`data-state="retrying"`, `class="badge dead"`, "down for maintenance", " ms<"} {
		if !strings.Contains(row, want) {
			t.Errorf("the retrying delivery's row lacks %q:\n%s", want, row)
		}
	}
	// The retry is due 5 s after the failure; the page counts down from
	// the moment it renders, which a loaded machine reaches seconds later.
	if !nextAttemptWithin5s.MatchString(row) {
		t.Errorf("the retrying delivery's row lacks a next attempt within 5 seconds:\n%s", row)
	}
	if n := strings.Count(row, "HTTP 503"); n != 1 {
		t.Errorf("HTTP 503 appears %d times in the row, want once", n)
	}
	if strings.Contains(row, ">0s<") {
		t.Error("the attempt's duration reads 0s")
	}

	// Staff see the failing endpoint, and its breaker, on /admin/outbox.
	staff := f.client()
	staff.login("support@jejak.test")
	out := staff.get("/admin/outbox")
	if n := strings.Count(out.body, `data-testid="failing-endpoint"`); n != 1 || !strings.Contains(out.body, "/hook") {
		t.Fatalf("%d failing endpoints on /admin/outbox, want 1", n)
	}
	if _, err := f.db.Admin.Exec(context.Background(), `UPDATE webhook_endpoints SET consecutive_failures = 5,
		breaker_open_until = now() + interval '1 minute' WHERE id = $1`, s.failing); err != nil {
		t.Fatal(err)
	}
	out = staff.get("/admin/outbox")
	if state := between(out.body, `data-testid="endpoint-state"`, `</td>`); !strings.Contains(state, "breaker open") {
		t.Fatalf("breaker state on /admin/outbox: %q", state)
	}
	list = s.owner.get("/t/toko-bunga-melati/webhooks")
	if !strings.Contains(list.body, `data-breaker="open"`) || !strings.Contains(list.body, "breaker open") {
		t.Fatal("the owner's list does not show the open breaker")
	}
	// Held behind the open breaker, the delivery says so instead of a
	// countdown to an attempt that has no job.
	if _, err := f.db.Admin.Exec(context.Background(), `UPDATE webhook_deliveries SET held_at = now(), next_attempt_at = NULL
		WHERE endpoint_id = $1`, s.failing); err != nil {
		t.Fatal(err)
	}
	page = s.owner.get(fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", s.failing))
	row = between(page.body, `data-testid="delivery"`, `</tr>`)
	if !strings.Contains(row, "held until the endpoint answers again") || strings.Contains(row, "next attempt in") {
		t.Fatalf("the held delivery's row:\n%s", row)
	}
	// The endpoint says how many wait behind its breaker.
	if held := between(page.body, `data-testid="held-count">`, `<`); held != `data-testid="held-count">1 delivery held until the endpoint answers again` {
		t.Fatalf("held count on the endpoint page: %q", held)
	}
}

// between is the part of s from the first start to the next end.
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

// TestWebhookDeleteSettingsAndRecoverForms: delete is 404 from another
// tenant and frees the endpoint from the list; a rate out of range is a
// 422 that changes nothing; recover sends the failed deliveries again.
func TestWebhookDeleteSettingsAndRecoverForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newWebhookScene(t, f)
	base := fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", s.fine)

	bad := s.owner.post(base+"/settings", s.owner.withCSRF(url.Values{"rate_limit": {"5000"}}), false)
	if bad.status != http.StatusUnprocessableEntity {
		t.Fatalf("rate 5000: %d, want 422", bad.status)
	}
	if n := f.count(`SELECT count(*) FROM webhook_endpoints WHERE rate_limit IS NOT NULL OR ordered`); n != 0 {
		t.Fatalf("%d endpoints changed by a refused form", n)
	}
	ok := s.owner.post(base+"/settings", s.owner.withCSRF(url.Values{"rate_limit": {"20"}, "ordered": {"on"}}), false)
	if ok.status != http.StatusSeeOther || f.count(`SELECT count(*) FROM webhook_endpoints WHERE rate_limit = 20 AND ordered AND id = $1`, s.fine) != 1 {
		t.Fatalf("settings: %d", ok.status)
	}

	// The failing endpoint's delivery: disabled with it pending, it fails;
	// re-enabled, recover sends it again.
	failing := fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", s.failing)
	s.owner.post(failing+"/disable", s.owner.withCSRF(nil), false)
	f.db.Admin.Exec(context.Background(), `UPDATE webhook_deliveries SET state = 'failed' WHERE endpoint_id = $1`, s.failing)
	s.owner.post(failing+"/enable", s.owner.withCSRF(nil), false)
	if a := s.owner.post(failing+"/recover", s.owner.withCSRF(url.Values{"hours": {"5"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("recover with an unlisted span: %d, want 422", a.status)
	}
	a := s.owner.post(failing+"/recover", s.owner.withCSRF(url.Values{"hours": {"24"}}), false)
	if a.status != http.StatusSeeOther || f.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND state = 'pending'`, s.failing) != 1 {
		t.Fatalf("recover: %d", a.status)
	}

	if a := s.owner.post(base+"/test", s.owner.withCSRF(url.Values{"type": {"plan.changed"}}), false); a.status != http.StatusSeeOther ||
		f.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id < 0 AND event_type = 'plan.changed'`, s.fine) != 1 {
		t.Fatalf("send test event: %d", a.status)
	}
	if a := s.owner.post(base+"/test", s.owner.withCSRF(url.Values{"type": {"nope.never"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("test event of an unknown type: %d, want 422", a.status)
	}
	sari := f.client()
	sari.login("sari@senja.test")
	if a := sari.post(base+"/delete", sari.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Fatalf("delete from another tenant: %d, want 404", a.status)
	}
	if a := s.owner.post(base+"/delete", s.owner.withCSRF(nil), false); a.status != http.StatusSeeOther {
		t.Fatalf("delete: %d", a.status)
	}
	if list := s.owner.get("/t/toko-bunga-melati/webhooks"); strings.Contains(list.body, fmt.Sprintf(`data-webhook-id="%d"`, s.fine)) {
		t.Fatal("the deleted endpoint is still listed")
	}
	if a := s.owner.get(base); a.status != http.StatusNotFound {
		t.Fatalf("deleted endpoint's page: %d, want 404", a.status)
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE action IN ('webhook.endpoint.delete', 'webhook.endpoint.configure',
		'webhook.endpoint.recover', 'webhook.endpoint.test')`); n != 4 {
		t.Fatalf("%d audited changes, want delete, configure, recover and test", n)
	}
}
