package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/browsertest"
)

// TestBrowserAlertsRefreshLive: support keeps /admin/alerts open; a rule
// that starts firing appears under Firing without a reload (the htmx poll
// swaps the live part; a window marker survives).
func TestBrowserAlertsRefreshLive(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	var value float64
	rules := alert.DefaultRules(alert.Sources{})
	for i := range rules {
		if rules[i].Name == alert.RuleDeadLetters {
			rules[i].For = 0
			rules[i].Eval = func(context.Context, alert.Reader, time.Time) (float64, string, error) {
				return value, "dead letters piling up", nil
			}
		}
	}
	ev := alert.New(alert.Config{Pool: f.db.System, Logger: quietLog(), Rules: rules})
	if _, err := ev.EvaluateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin/alerts"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-firing"]`))); err != nil {
		t.Fatalf("open alerts: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	value = 9
	if _, err := ev.EvaluateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The page polls every 10 s.
	wctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](
		`!!document.querySelector('[data-testid="alerts-firing"] [data-rule="dead_letters_growing"]')`)); err != nil {
		t.Fatalf("firing alert never appeared: %v", err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
	if err != nil || !marker {
		t.Fatalf("page was reloaded (marker=%v, err=%v)", marker, err)
	}
	browsertest.Screenshot(t, ctx, "admin-alerts-firing")
}
