package web_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/job"
)

// TestBrowserSupportRetriesDeadJob: support opens the dead letters, is
// refused without a reason (message shown, job still dead), retries with a
// reason, is asked to confirm (the job failed permanently) and confirms, and
// the row leaves the list in place (no reload: a window marker
// survives); the job is pending and the retry with its reason is in
// toko-bunga-melati's audit trail.
func TestBrowserSupportRetriesDeadJob(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	id := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550 mailbox unavailable")[0]
	f.makeDead("kopi-senja", "points.award", 1, "bad payload")
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	row := fmt.Sprintf(`[data-testid="dead-row"][data-job-id="%d"]`, id)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin/dead"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("open dead letters: %v", err)
	}
	browsertest.Screenshot(t, ctx, "admin-dead")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	wait := func(js, what string) { t.Helper(); browsertest.Wait(t, ctx, what, js) }

	// No reason: refused, message next to the field.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+` [data-testid="retry"]`))); err != nil {
		t.Fatalf("click retry: %v", err)
	}
	wait(fmt.Sprintf(`!!document.querySelector('%s [data-testid="field-error"]')`, row), "no refusal message")
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` [data-testid="field-error"]`)))
	if err != nil || msg == "" {
		t.Fatalf("refusal message: %q %v", msg, err)
	}
	if st := f.jobState(id); st != "dead" {
		t.Fatalf("refused retry changed the job: %s", st)
	}

	// With a reason: the row is replaced in place.
	const reason = "SMTP relay fixed, ticket OPS-42"
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(row+` [data-testid="reason"]`), reason),
		chromedp.Click(chromedp.CSS(row+` [data-testid="retry"]`)),
	); err != nil {
		t.Fatalf("retry: %v", err)
	}
	// It failed permanently: the row asks first, saying why, and nothing
	// changed until the operator retries anyway.
	confirm := fmt.Sprintf(`[data-testid="dead-row-confirm"][data-job-id="%d"]`, id)
	wait(fmt.Sprintf(`!!document.querySelector('%s')`, confirm), "no confirmation for a permanent failure")
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(confirm+` [data-testid="retry-confirm-text"]`)))
	if err != nil || !strings.Contains(text, "smtp 550 mailbox unavailable") || !strings.Contains(text, "Retry anyway?") {
		t.Fatalf("confirmation text: %q %v", text, err)
	}
	if st := f.jobState(id); st != "dead" {
		t.Fatalf("an unconfirmed retry changed the job: %s", st)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(confirm+` [data-testid="retry-anyway"]`))); err != nil {
		t.Fatalf("retry anyway: %v", err)
	}
	wait(fmt.Sprintf(`!document.querySelector('%s') && !!document.querySelector('[data-testid="dead-row-done"][data-job-id="%d"]')`, row, id), "row never left the dead list")
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
	if err != nil || !marker {
		t.Fatalf("page was reloaded (marker=%v, err=%v)", marker, err)
	}
	if st := f.jobState(id); st != "pending" {
		t.Fatalf("job is %s after retry", st)
	}
	ev := f.trail("toko-bunga-melati", "job.replayed")
	if len(ev) != 1 || ev[0].ActorKind != audit.ActorStaff || detailReason(t, ev[0]) != reason || *ev[0].JobID != id {
		t.Fatalf("melati's trail: %+v", ev)
	}
	if n := len(f.trail("kopi-senja", "job.replayed")); n != 0 {
		t.Fatalf("kopi-senja got %d replay events", n)
	}
	browsertest.Screenshot(t, ctx, "admin-dead-after-retry")

	// Screenshots of the other staff pages.
	for _, p := range []struct{ path, name, sel string }{
		{"/admin/jobs", "admin-jobs", `[data-testid="jobs-results"]`},
		{fmt.Sprintf("/admin/jobs/%d", id), "admin-job", `[data-testid="job-meta"]`},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel))); err != nil {
			t.Fatalf("open %s: %v", p.path, err)
		}
		browsertest.Screenshot(t, ctx, p.name)
	}

	// The tenant owner sees the retry, by support staff, with its reason,
	// in his own timeline.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header.top form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#email`))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in as budi: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/audit"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-event"]`))); err != nil {
		t.Fatalf("open budi's timeline: %v", err)
	}
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`[...document.querySelectorAll('[data-testid="audit-event"][data-action="job.replayed"]')]
		.some(e => e.textContent.includes(%q) && /\(support\)/.test(e.textContent))`, reason)))
	if err != nil || !ok {
		t.Fatalf("budi's timeline lacks the staff retry with its reason (ok=%v, err=%v)", ok, err)
	}
	browsertest.Screenshot(t, ctx, "tenant-timeline-after-retry")
}

// TestBrowserOverviewRefreshes: the overview's counters change without a
// reload when jobs finish server-side.
func TestBrowserOverviewRefreshes(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, 200*time.Millisecond)
	for i := 0; i < 3; i++ {
		f.enqueue("toko-bunga-melati", job.EnqueueParams{})
	}
	f.enqueue("kopi-senja", job.EnqueueParams{Kind: "points.award"})
	js := f.claimAll("browser-worker")
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="count-running"]`))); err != nil {
		t.Fatalf("open overview: %v", err)
	}
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	if r, s := text(`[data-testid="count-running"]`), text(`[data-testid="count-succeeded"]`); r != "4" || s != "0" {
		t.Fatalf("before: running=%s succeeded=%s", r, s)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	f.complete("browser-worker", js[0])
	f.complete("browser-worker", js[1])
	f.fail("browser-worker", js[2], job.Permanent(errors.New("smtp 550")))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := chromedp.Run(wctx, chromedp.Poll[bool](`(() => {
		const t = id => (document.querySelector('[data-testid="' + id + '"]') || {}).textContent;
		return t('count-running') === '1' && t('count-succeeded') === '2' && t('count-dead') === '1' && t('count-failed') === '1';
	})()`))
	if err != nil {
		t.Fatalf("counters never changed: running=%s succeeded=%s dead=%s: %v", text(`[data-testid="count-running"]`),
			text(`[data-testid="count-succeeded"]`), text(`[data-testid="count-dead"]`), err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
	if err != nil || !marker {
		t.Fatalf("page was reloaded (marker=%v, err=%v)", marker, err)
	}
	browsertest.Screenshot(t, ctx, "admin-overview")
}
