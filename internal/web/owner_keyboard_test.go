package web_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
)

// tabTo presses Tab until the focused element matches css (at most 400
// times) and checks the focus is visible (an outline is drawn).
func tabTo(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			t.Fatalf("tab: %v", err)
		}
		hit, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, css)))
		if err != nil {
			t.Fatal(err)
		}
		if hit {
			visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = getComputedStyle(document.activeElement);
				return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2 })()`))
			if err != nil || !visible {
				t.Fatalf("focus on %s is not visible (%v)", css, err)
			}
			return
		}
	}
	t.Fatalf("Tab never reached %s", css)
}

func typeText(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(s)); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

func enter(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatalf("enter: %v", err)
	}
}

// TestBrowserKeyboardOnly signs in, filters the timeline, loads older
// events and reaches the export with the keyboard alone, with the focus
// visible at every stop; staff retry a dead letter with a reason (and confirm) the same
// way. At phone width the navigation starts folded behind "Menu", which
// the keyboard opens.
func TestBrowserKeyboardOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := demo.SeedHistory(context.Background(), f.db.System, clock.Database{}); err != nil {
		t.Fatal(err)
	}
	owner := f.client()
	owner.login("budi@melati.test")
	for i := 0; i < 20; i++ { // enough events for an "older" page
		owner.post("/t/toko-bunga-melati/projects", owner.withCSRF(url.Values{"name": {fmt.Sprintf("Proyek %d", i)}}), false)
	}
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")[0]
	ctx := browsertest.New(t)

	// Sign in.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900), chromedp.Navigate(f.srv.URL+"/login"), chromedp.WaitVisible(chromedp.CSS(`#email`))); err != nil {
		t.Fatal(err)
	}
	tabTo(t, ctx, "#email")
	typeText(t, ctx, "budi@melati.test")
	tabTo(t, ctx, "#password")
	typeText(t, ctx, demo.Password)
	enter(t, ctx)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="viewer"]`))); err != nil {
		t.Fatalf("signed in: %v", err)
	}

	// A quick filter, then the action filter under "More filters".
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/audit"), chromedp.WaitVisible(chromedp.CSS(`#f-q`))); err != nil {
		t.Fatal(err)
	}
	tabTo(t, ctx, `[data-testid="quick-deletions"]`)
	enter(t, ctx)
	browsertest.Wait(t, ctx, "quick filter deletions", `location.search.includes("quick=deletions") &&
		[...document.querySelectorAll('[data-testid="audit-event"]')].some(li => li.dataset.action === "project.delete")`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/audit"), chromedp.WaitVisible(chromedp.CSS(`#f-q`))); err != nil {
		t.Fatal(err)
	}
	tabTo(t, ctx, `[data-testid="audit-more-filters"] > summary`)
	enter(t, ctx)
	tabTo(t, ctx, "#f-action")
	typeText(t, ctx, "project.delete")
	enter(t, ctx)
	browsertest.Wait(t, ctx, "filtered to project.delete", `location.search.includes("action=project.delete") &&
		[...document.querySelectorAll('[data-testid="audit-event"]')].every(li => li.dataset.action === "project.delete") &&
		document.querySelectorAll('[data-testid="audit-event"]').length > 0`)
	// Export is a link the keyboard reaches.
	tabTo(t, ctx, `[data-testid="export-csv"]`)

	// "Older" loads in place.
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-older"]`))); err != nil {
		t.Fatal(err)
	}
	before, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="audit-event"]').length`))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__kbMarker = true`)); err != nil {
		t.Fatal(err)
	}
	tabTo(t, ctx, `[data-testid="audit-older"]`)
	enter(t, ctx)
	browsertest.Wait(t, ctx, "older events appended", fmt.Sprintf(`document.querySelectorAll('[data-testid="audit-event"]').length > %d && window.__kbMarker === true`, before))
	live, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("audit-events").getAttribute("aria-live")`))
	if err != nil || live != "polite" {
		t.Fatalf("the event list is not a live region: %q %v", live, err)
	}

	// Phone width: the navigation is folded; Enter on "Menu" opens it.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 800), chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/"), chromedp.WaitVisible(chromedp.CSS(`.nav-menu > summary`))); err != nil {
		t.Fatal(err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector('.nav-menu nav a').checkVisibility()`))
	if err != nil || !hidden {
		t.Fatalf("navigation not folded at 390 px (%v)", err)
	}
	tabTo(t, ctx, ".nav-menu > summary")
	enter(t, ctx)
	browsertest.Wait(t, ctx, "menu opened", `document.querySelector('.nav-menu nav a').checkVisibility()`)
	tabTo(t, ctx, `.nav-menu nav a[href$="/members"]`)
	enter(t, ctx)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="members"]`))); err != nil {
		t.Fatalf("members page: %v", err)
	}

	// Staff: retry a dead letter with a reason, keyboard only.
	staff := browsertest.New(t)
	if err := signIn(staff, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(staff, chromedp.Navigate(f.srv.URL+"/admin/dead"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="reason"]`))); err != nil {
		t.Fatal(err)
	}
	tabTo(t, staff, fmt.Sprintf(`tr[data-job-id="%d"] [data-testid="reason"]`, dead))
	typeText(t, staff, "relay fixed")
	enter(t, staff)
	// It failed permanently: the row asks to confirm, with the focus on
	// "Retry anyway".
	browsertest.Wait(t, staff, "asked to confirm", fmt.Sprintf(`!!document.activeElement &&
		document.activeElement.matches('[data-testid="dead-row-confirm"][data-job-id="%d"] [data-testid="retry-anyway"]')`, dead))
	enter(t, staff)
	browsertest.Wait(t, staff, "dead letter retried", fmt.Sprintf(`!!document.querySelector('[data-testid="dead-row-done"][data-job-id="%d"]')`, dead))
	if st := f.jobState(dead); st != "pending" {
		t.Fatalf("job %d is %s after a keyboard retry", dead, st)
	}
}
