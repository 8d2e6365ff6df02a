package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
)

// TestBrowserWebhookPagesAtTwoWidths: the webhooks list and an endpoint's
// deliveries pass axe and do not scroll sideways at 390 px; the retrying
// delivery is red with its next attempt, and the destructive buttons are
// drawn in the danger colour, unlike the primary one.
func TestBrowserWebhookPagesAtTwoWidths(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newWebhookScene(t, f)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	detail := fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", s.failing)
	for _, p := range []string{"/t/toko-bunga-melati/webhooks", detail} {
		checkPage(t, ctx, f.srv.URL, "owner", p)
	}
	for _, w := range widths {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(f.srv.URL+detail),
			chromedp.WaitReady(chromedp.CSS(`[data-testid="delivery"]`))); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => {
			const badge = document.querySelector('[data-state="retrying"] [data-testid="delivery-state"]');
			const next = document.querySelector('[data-testid="next-attempt"]');
			const del = document.querySelector('[data-testid="delete"]');
			return {badge: badge ? getComputedStyle(badge).color : "", next: next ? next.innerText : "",
				del: del ? getComputedStyle(del).color : "", width: String(document.documentElement.scrollWidth)};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		const danger = "rgb(180, 35, 24)"
		if got["badge"] != danger || got["del"] != danger || got["next"] == "" {
			t.Errorf("@%d: retrying badge %q, delete button %q (want %s), next attempt %q", w, got["badge"], got["del"], danger, got["next"])
		}
		if w == 390 && got["width"] != "390" {
			t.Errorf("@390 the deliveries page is %s px wide", got["width"])
		}
	}
}
