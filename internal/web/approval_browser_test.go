package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/clock"
)

// TestBrowserTwoPersonDisable: in a real Chromium, support requests to
// disable Rina's access from the tenant page (the approvals page then
// offers them no approve button on their own request); admin signs in,
// approves it, and once the job runs Rina's membership is disabled.
func TestBrowserTwoPersonDisable(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	rina := f.userID("rina@melati.test")
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	row := fmt.Sprintf(`[data-testid="member-row"][data-user-id="%d"]`, rina)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin/tenants/toko-bunga-melati"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("tenant page: %v", err)
	}
	browsertest.Screenshot(t, ctx, "staff-tenant-page")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(row+` input[name="reason"]`), "Ponsel Rina hilang, tiket SUP-7"),
		chromedp.Click(chromedp.CSS(row+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatalf("request: %v", err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil || !strings.Contains(body, "waiting for a second staff member") || !strings.Contains(body, "Your request") {
		t.Fatalf("approvals page after request: %q %v", body, err)
	}
	browsertest.Screenshot(t, ctx, "approvals-own-request")
	if n := f.count(`SELECT count(*) FROM approvals WHERE state = 'pending'`); n != 1 {
		t.Fatalf("pending approvals: %d", n)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
	); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if err := signIn(ctx, f.srv.URL, "admin@jejak.test"); err != nil {
		t.Fatalf("sign in admin: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(f.srv.URL+"/admin/approvals"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="approve"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatalf("approve: %v", err)
	}
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="flash"]`)))
	if err != nil || !strings.Contains(flash, "approved") {
		t.Fatalf("flash %q %v", flash, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="schedules"]`))); err != nil {
		t.Fatalf("admin home: %v", err)
	}
	browsertest.Screenshot(t, ctx, "admin-schedules")
	f.work(5)
	if n := f.count(`SELECT count(*) FROM memberships WHERE user_id = $1 AND disabled_at IS NOT NULL`, rina); n != 1 {
		t.Fatal("membership not disabled after approval")
	}
}
