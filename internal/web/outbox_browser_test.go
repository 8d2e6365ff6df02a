package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
)

// TestBrowserOutboxRefreshesLive: staff keep /admin/outbox open; a message
// that fails meanwhile appears in the failed count and the lag turns red
// without a reload (htmx polls the live part; a window marker survives).
func TestBrowserOutboxRefreshesLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin/outbox"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="outbox-live"]`))); err != nil {
		t.Fatalf("open outbox: %v", err)
	}
	if n, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="outbox-failed-count"]`))); err != nil || n != "0" {
		t.Fatalf("failed count before: %q %v", n, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	_, err := f.db.Admin.Exec(context.Background(), `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload,
		created_at, available_at, state, attempts, last_error)
		SELECT id, 'project.created', 'project', '1', '{}'::jsonb, now(), now(), 'failed', 5, 'nats: timeout' FROM tenants WHERE slug = 'kopi-senja'
		UNION ALL
		SELECT id, 'project.created', 'project', '2', '{}'::jsonb, now() - interval '3 minutes', now(), 'pending', 0, NULL FROM tenants WHERE slug = 'kopi-senja'`)
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Wait(t, ctx, "failed count and red lag never appeared",
		`document.querySelector('[data-testid="outbox-failed-count"]').textContent.trim() === '1' &&
		 document.querySelector('[data-testid="outbox-lag"]').dataset.late === 'true'`)
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
	if err != nil || !marker {
		t.Fatalf("page was reloaded (marker=%v, err=%v)", marker, err)
	}
	browsertest.Screenshot(t, ctx, "admin-outbox")
}

// TestBrowserWebhookCreateShowsSecretOnce: the owner adds an endpoint with
// the form; the answer shows the whsec_ secret, a later visit does not.
func TestBrowserWebhookCreateShowsSecretOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	form := `[data-testid="webhook-form"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/webhooks"),
		chromedp.WaitVisible(chromedp.CSS(form)),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="url"]`), "https://hooks.example.com/jejak"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="events"]`), "project.created, project.deleted"),
		chromedp.Submit(chromedp.CSS(form+` input[name="url"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="new-secret"]`)),
	); err != nil {
		t.Fatalf("create endpoint: %v", err)
	}
	secret, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="new-secret"]`)))
	if err != nil || len(secret) < len("whsec_")+32 || secret[:6] != "whsec_" {
		t.Fatalf("secret shown: %q %v", secret, err)
	}
	browsertest.Screenshot(t, ctx, "tenant-webhooks-created")
	browsertest.Wait(t, ctx, "endpoint not listed", `!!document.querySelector('[data-testid="webhook"]')`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/webhooks"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="webhooks"]`))); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid="new-secret"]') || document.body.innerText.includes('whsec_')`))
	if err != nil || shown {
		t.Fatalf("secret shown again on a later visit (%v)", err)
	}
}
