package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
)

// evalT evaluates js and fails the test on an error.
func evalT[T any](t *testing.T, ctx context.Context, what, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// noEmptyDay is true when every day heading that shows has an event right
// under it (the live poller, hidden, aside).
const noEmptyDay = `[...document.querySelectorAll("#audit-events > .audit-day")].filter(h => h.checkVisibility()).every(h => {
	let n = h.nextElementSibling;
	while (n && n.classList.contains("audit-poll")) n = n.nextElementSibling;
	return n && n.classList.contains("audit-event");
})`

// TestBrowserTrailFitsTwoScreens: at 1360 px a page of 50 events is at
// most two 900 px screens tall, one line each, with the filters open; the
// "Deletions" quick filter and a name search answer the seed's question in
// place, with no day heading left empty; at 390 px nothing scrolls
// sideways and the filters are folded until asked for.
func TestBrowserTrailFitsTwoScreens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := demo.SeedHistory(context.Background(), f.db.System, clock.Database{}); err != nil {
		t.Fatal(err)
	}
	// Enough of today's events that the newest page is a full one.
	f.record(melati, nil, systemEvents(50, "report.sent")...)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	trail := f.srv.URL + "/t/" + melati + "/audit"
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900), chromedp.Navigate(trail),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-event"]`))); err != nil {
		t.Fatal(err)
	}
	if n := evalT[int](t, ctx, "events", `document.querySelectorAll("#audit-events > .audit-event").length`); n != 50 {
		t.Fatalf("first page shows %d events, want 50", n)
	}
	height := evalT[float64](t, ctx, "list height", `document.querySelector("#audit-events").getBoundingClientRect().height`)
	if height > 2*900 {
		t.Errorf("50 events take %.0f px at 1360 px, want at most two 900 px screens", height)
	}
	// One line each: no event is taller than a line and its padding.
	if tallest := evalT[float64](t, ctx, "tallest event", `Math.max(...[...document.querySelectorAll("#audit-events > .audit-event")].map(e => e.getBoundingClientRect().height))`); tallest > 40 {
		t.Errorf("an event is %.0f px tall at 1360 px: more than one line", tallest)
	}
	if !evalT[bool](t, ctx, "filters shown", `document.querySelector("#f-q").checkVisibility() && document.querySelector('[data-testid="quick-deletions"]').checkVisibility()`) {
		t.Error("the search box or the quick filters are hidden at 1360 px")
	}
	browsertest.Screenshot(t, ctx, "trail-1360")

	// "Who deleted Katalog Musim Hujan?": one click.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="quick-deletions"]`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Wait(t, ctx, "deletions only", `location.search === "?quick=deletions" &&
		[...document.querySelectorAll("#audit-events > .audit-event")].every(e => ["project.delete", "member.remove", "invitation.revoke", "job.discarded", "audit_token.revoke"].includes(e.dataset.action)) &&
		[...document.querySelectorAll('[data-testid="audit-sentence"]')].some(s => s.textContent.includes("deleted project “Katalog Musim Hujan”"))`)
	if !evalT[bool](t, ctx, "day headings", noEmptyDay) {
		t.Error("a day heading shows with no event under it")
	}
	// A name search, typed as an owner would.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="quick-deletions"]`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Wait(t, ctx, "quick filter cleared", `location.search === "" && document.querySelector('[data-testid="quick-deletions"]').getAttribute("aria-current") === null`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#f-q`), "katalog"), chromedp.Click(chromedp.CSS(`[data-testid="audit-search-submit"]`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Wait(t, ctx, "search answered", `new URLSearchParams(location.search).get("q") === "katalog" && document.querySelectorAll("#audit-events > .audit-event").length >= 2 &&
		[...document.querySelectorAll("#audit-events > .audit-event")].every(e => e.textContent.includes("Katalog"))`)
	if !evalT[bool](t, ctx, "day headings", noEmptyDay) {
		t.Error("a day heading shows with no event under it in the search")
	}

	// A phone: nothing wider than the screen, filters folded into one line.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 800), chromedp.Navigate(trail),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-event"]`))); err != nil {
		t.Fatal(err)
	}
	if w := evalT[float64](t, ctx, "width", `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the trail is %.0f px wide at 390 px", w)
	}
	if evalT[bool](t, ctx, "folded", `document.querySelector('[data-testid="audit-filters-fold"]').open || document.querySelector("#f-q").checkVisibility()`) {
		t.Error("the filters are not folded on a phone")
	}
	if top := evalT[float64](t, ctx, "first event", `document.querySelector("#audit-events > .audit-event").getBoundingClientRect().top`); top > 800 {
		t.Errorf("the first event starts %.0f px down on a phone: below the first screen", top)
	}
	browsertest.Screenshot(t, ctx, "trail-390")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="audit-filters-fold"] > summary`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Wait(t, ctx, "filters unfold", `document.querySelector("#f-q").checkVisibility()`)
	if w := evalT[float64](t, ctx, "width", `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the unfolded filters are %.0f px wide at 390 px", w)
	}
}
