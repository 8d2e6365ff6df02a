package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/webhook"
)

var secretShown = regexp.MustCompile(`data-testid="new-secret">(whsec_[A-Za-z0-9+/=]+)<`)

// verifyStandardWebhook is a receiver's check with the Standard Webhooks
// project's own Go library, not Jejak's code (the timestamp's tolerance
// left out: test clocks are frozen in the past).
func verifyStandardWebhook(secret string, h http.Header, body []byte) bool {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return false
	}
	return wh.VerifyIgnoringTimestamp(body, h) == nil
}

// fanoutSink hands relayed messages straight to the webhook fan-out (the
// NATS leg is covered by the webhook package's tests).
type fanoutSink struct{ f *webhook.Fanout }

func (s fanoutSink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		body, _ := m.Body()
		_, errs[i] = s.f.HandleEvent(ctx, m.TenantID, m.ID, m.Type, body, m.TraceID)
	}
	return errs
}

func TestWebhookSecretFromThePageVerifiesARealDelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var mu sync.Mutex
	var verified, got int
	var gotBody, secret string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got++
		gotBody = string(b)
		if verifyStandardWebhook(secret, r.Header, b) {
			verified++
		}
	}))
	defer rcv.Close()

	owner := f.client()
	owner.login("budi@melati.test")
	bad := owner.post("/t/toko-bunga-melati/webhooks", owner.withCSRF(url.Values{"url": {"gopher://x"}, "events": {"*"}}), false)
	if bad.status != http.StatusUnprocessableEntity || !strings.Contains(bad.body, `data-testid="field-error-url"`) {
		t.Fatalf("bad URL: %d", bad.status)
	}
	page := owner.post("/t/toko-bunga-melati/webhooks", owner.withCSRF(url.Values{"url": {rcv.URL + "/jejak"}, "events": {"project.created"}}), false)
	m := secretShown.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || m == nil {
		t.Fatalf("create: %d, no secret shown", page.status)
	}
	mu.Lock()
	secret = m[1] // the receiver knows only what the page showed
	mu.Unlock()
	if again := owner.get("/t/toko-bunga-melati/webhooks"); strings.Contains(again.body, m[1]) {
		t.Fatal("the secret is shown again on a later visit")
	}
	// The owner creates a project: its project.created event goes out.
	owner.post("/t/toko-bunga-melati/projects", owner.withCSRF(url.Values{"name": {"Buket Webhook"}}), false)

	fan := &webhook.Fanout{System: f.db.System, Jobs: f.jobs, Logger: quietLog()}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: f.db.System, Sink: fanoutSink{fan}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d %v", n, err)
	}
	d := &webhook.Deliverer{App: f.db.App, Jobs: f.jobs, Logger: quietLog(),
		Client: webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Client()}
	jobs, err := f.jobs.Claim(ctx, "test-worker", 10)
	if err != nil || len(jobs) != 1 || jobs[0].Kind != webhook.Kind {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if err := d.Handle(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if got != 1 || verified != 1 || !strings.Contains(gotBody, `"type":"project.created"`) || !strings.Contains(gotBody, "Buket Webhook") {
		mu.Unlock()
		t.Fatalf("receiver got %d requests, %d verified, body %s", got, verified, gotBody)
	}
	mu.Unlock()

	// The owner sees the delivery and its attempt.
	var ep int64
	if err := f.db.Admin.QueryRow(ctx, "SELECT id FROM webhook_endpoints").Scan(&ep); err != nil {
		t.Fatal(err)
	}
	dp := owner.get(fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", ep))
	if dp.status != http.StatusOK || !strings.Contains(dp.body, `data-state="succeeded"`) || !strings.Contains(dp.body, "HTTP 200") {
		t.Fatalf("deliveries page: %d %.2000s", dp.status, dp.body)
	}
	// Changes are in the tenant's trail.
	if n := f.count(`SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.create'`); n != 1 {
		t.Fatalf("%d create events", n)
	}
}

func TestWebhooksCrossTenantIs404AndMembersAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hook, delivery := f.webhookWithDelivery("toko-bunga-melati")
	sari := f.client()
	sari.login("sari@senja.test")
	for _, p := range []string{
		fmt.Sprintf("/t/kopi-senja/webhooks/%d", hook),
		fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", hook),
		"/t/toko-bunga-melati/webhooks",
	} {
		if a := sari.get(p); a.status != http.StatusNotFound || strings.Contains(a.body, "hooks.example.com") {
			t.Errorf("GET %s as another tenant's owner: %d", p, a.status)
		}
	}
	for _, p := range []string{
		fmt.Sprintf("/t/kopi-senja/webhooks/%d/disable", hook),
		fmt.Sprintf("/t/kopi-senja/webhooks/%d/rotate", hook),
		fmt.Sprintf("/t/kopi-senja/webhooks/%d/deliveries/%d/resend", hook, delivery),
	} {
		if a := sari.post(p, sari.withCSRF(nil), false); a.status != http.StatusNotFound {
			t.Errorf("POST %s as another tenant's owner: %d", p, a.status)
		}
	}
	// A delivery of one endpoint is not reachable under another endpoint.
	otherHook, _ := f.webhookWithDelivery("kopi-senja")
	if a := sari.post(fmt.Sprintf("/t/kopi-senja/webhooks/%d/deliveries/%d/resend", otherHook, delivery), sari.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Errorf("resend of toko's delivery under kopi's endpoint: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND enabled`, hook); n != 1 {
		t.Fatal("another tenant changed the endpoint")
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'`); n != 0 {
		t.Fatal("another tenant queued a resend")
	}
	rina := f.client()
	rina.login("rina@melati.test")
	if a := rina.get("/t/toko-bunga-melati/webhooks"); a.status != http.StatusForbidden {
		t.Errorf("member: %d, want 403", a.status)
	}
}
