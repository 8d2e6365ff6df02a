package web_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/job"
)

// TestBrowserTenantAuditTimeline: budi reads his timeline in a real
// Chromium, filters it, loads older events in place, sees a new event
// appear at the top without a reload, reads his jobs, and gets a 404 on
// another tenant's trail. A marker on window proves the htmx steps never
// reloaded the page.
func TestBrowserTenantAuditTimeline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	budi := f.userID("budi@melati.test")
	f.record(melati, nil, systemEvents(60, "report.sent")...)
	for _, name := range []string{"Katalog Musim Hujan", "Buket Wisuda", "Rangkaian Duka"} {
		f.record(melati, nil, audit.Event{ActorKind: audit.ActorUser, ActorID: &budi, Action: "project.create",
			Entity: "project", EntityID: "1", Detail: []byte(`{"name": "` + name + `"}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	}
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	wait := func(what, js string) { t.Helper(); browsertest.Wait(t, ctx, what, js) }
	marker := func(step string) {
		t.Helper()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
		if err != nil || !ok {
			t.Fatalf("%s reloaded the page (marker lost, err=%v)", step, err)
		}
	}
	rows := `[...document.querySelectorAll('[data-testid="audit-event"]')]`

	err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href$="/audit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-event"]`)),
	)
	if err != nil {
		t.Fatalf("open timeline from the nav: %v", err)
	}
	wait("first page of 50", rows+`.length === 50`)
	browsertest.Screenshot(t, ctx, "timeline")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("set marker: %v", err)
	}

	// Filter by action through the form (htmx, URL pushed), under "More
	// filters".
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="audit-more-filters"] > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#f-action`)),
		chromedp.SendKeys(chromedp.CSS(`#f-action`), "project.create"),
		chromedp.Click(chromedp.CSS(`[data-testid="audit-filter-submit"]`)),
	)
	if err != nil {
		t.Fatalf("filter: %v", err)
	}
	wait("filtered rows", rows+`.length === 3 && `+rows+`.every(r => r.dataset.action === 'project.create')`)
	marker("filtering")
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "action=project.create") {
		t.Fatalf("filter not in the URL: %q %v", loc, err)
	}
	browsertest.Screenshot(t, ctx, "timeline-filtered")

	// "Details" fetches the event's record into the line it opens under.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="audit-event"] details.raw > summary`))); err != nil {
		t.Fatalf("open details: %v", err)
	}
	wait("the record unfolded in place", rows+`[0].querySelector('details.raw[open] [data-testid="audit-detail"]')?.textContent.includes('"name"') && `+
		rows+`[0].querySelector('[data-testid="audit-trace"]')?.textContent === '4bf92f3577b34da6a3ce929d0e0e4736' && `+
		`!`+rows+`[0].querySelector('[data-testid="audit-record-link"]')`)
	marker("opening details")

	// Clear the filter the same way and load older events in place.
	// (The form was swapped in by htmx: address it afresh.)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#f-action').value = ''; true`))
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="audit-filter-submit"]`)))
	}
	if err != nil {
		t.Fatalf("clear filter: %v", err)
	}
	wait("unfiltered again", rows+`.length === 50`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="audit-older"]`))); err != nil {
		t.Fatalf("older: %v", err)
	}
	total := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1`, f.tenantID(melati))
	wait("older events appended", rows+`.length === `+itoa(total)+` && !document.querySelector('[data-testid="audit-older"]')`)
	wait("each event once, newest first", rows+`.every((r, i, a) => i === 0 || +r.dataset.id < +a[i-1].dataset.id)`)
	marker("loading older events")

	// A new event recorded server-side appears at the top by itself.
	f.record(melati, nil, audit.Event{ActorKind: audit.ActorSystem, Action: "plan.renewed", Entity: "plan", EntityID: "pro"})
	wait("new event at the top", rows+`[0].dataset.action === 'plan.renewed' && `+rows+`.length === `+itoa(total+1))
	marker("live update")

	// Jobs: one dead with its error, one pending.
	ids := f.enqueueMany(melati, "email.weekly-report", 2)
	claimed, err := f.jobs.Claim(context.Background(), "test-worker", 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := f.jobs.Fail(context.Background(), "test-worker", claimed[0].ID, job.Permanent(errors.New("smtp 550 mailbox unavailable"))); err != nil {
		t.Fatalf("fail: %v", err)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href$="/jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs"]`)),
	)
	if err != nil {
		t.Fatalf("jobs page: %v", err)
	}
	wait("both jobs listed", `document.querySelectorAll('[data-testid="job"]').length === `+itoa(len(ids))+
		` && document.body.textContent.includes('smtp 550 mailbox unavailable')`)
	browsertest.Screenshot(t, ctx, "jobs")

	// Another tenant's trail is a plain 404.
	err = chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/"+url.PathEscape(senja)+"/audit"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-message"]`)))
	if err != nil {
		t.Fatalf("kopi-senja: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil || !strings.Contains(text, "Page not found.") || strings.Contains(text, "Kopi") {
		t.Fatalf("kopi-senja page: %q %v", text, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
