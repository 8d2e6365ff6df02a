package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/job"
)

// TestBrowserOverviewRefreshKeepsFocus: a keyboard user who focused a link
// inside /admin's refreshing overview still has it focused after two
// refreshes (the region is morphed in place, not replaced), the page keeps
// its scroll position, and only the alert banner is a live region.
func TestBrowserOverviewRefreshKeepsFocus(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	f.enqueue("toko-bunga-melati", job.EnqueueParams{})
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 600), chromedp.Navigate(f.srv.URL+"/admin"),
		chromedp.WaitVisible(chromedp.CSS(`#overview a[href="/admin/dead"]`))); err != nil {
		t.Fatalf("open overview: %v", err)
	}
	browsertest.Wait(t, ctx, "htmx ready", `typeof htmx === "object" && document.readyState === "complete"`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.__swaps = 0;
		document.body.addEventListener("htmx:afterSettle", e => { if (e.target.id === "overview") window.__swaps++; });
		window.__region = document.getElementById("overview");
		window.__focused = document.querySelector('#overview a[href="/admin/dead"]');
		window.__focused.focus();
		window.scrollTo(0, 200);
		window.__scroll = window.scrollY;
		return document.activeElement === window.__focused && window.__scroll > 0;
	})()`)); err != nil {
		t.Fatalf("focus a link in the overview: %v", err)
	}
	live, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#overview[aria-live], #overview [aria-live]")].map(e => e.id)`))
	if err != nil || len(live) != 1 || live[0] != "overview-alerts" {
		t.Fatalf("live regions in the overview: %v (%v), want only the alert banner's", live, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`window.__swaps >= 2`)); err != nil {
		t.Fatalf("the overview did not refresh twice: %v", err)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]bool](`({
		focus: document.activeElement === window.__focused && document.contains(window.__focused),
		region: document.getElementById("overview") === window.__region,
		scroll: window.scrollY === window.__scroll,
	})`))
	if err != nil {
		t.Fatalf("read focus: %v", err)
	}
	for what, ok := range kept {
		if !ok {
			active, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 120)`))
			t.Errorf("after two refreshes the %s was lost (active element: %s)", what, active)
		}
	}
}
