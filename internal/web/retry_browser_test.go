package web_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/job"
)

// TestBrowserJobPageFollowsRetriedJob: support retries a job that failed
// permanently from its page (asked to confirm first), lands back on the
// page, and sees the job's outcome appear in place when the worker
// finishes it: no reload (a window marker survives).
func TestBrowserJobPageFollowsRetriedJob(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	release := make(chan struct{})
	f.replayWorker(func(ctx context.Context, _ *job.Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	id := f.deadReplayJob()
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "support@jejak.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	page := fmt.Sprintf("%s/admin/jobs/%d", f.srv.URL, id)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900), chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`#job-reason`)),
		chromedp.SendKeys(chromedp.CSS(`#job-reason`), "customer updated the card"),
		chromedp.Click(chromedp.CSS(`#job-actions button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="retry-confirm"]`)),
	); err != nil {
		t.Fatalf("retry from the job page: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="retry-confirm-text"]`)))
	if err != nil || !strings.Contains(text, "card declined: do not honor") {
		t.Fatalf("confirmation: %q %v", text, err)
	}
	if st := f.jobState(id); st != "dead" {
		t.Fatalf("the unconfirmed retry changed the job: %s", st)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="retry-anyway"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-live"][hx-trigger]`))); err != nil {
		t.Fatalf("retry anyway: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	browsertest.Screenshot(t, ctx, "admin-job-following")
	// The worker holds the replayed job until released: the page shows it
	// running, then its outcome, swapped in by the page's own polling.
	browsertest.Wait(t, ctx, "job shown running", `!!document.querySelector('[data-testid="job-live"][data-state="running"]')`)
	close(release)
	browsertest.Wait(t, ctx, "outcome never shown", `!!document.querySelector('[data-testid="job-live"][data-state="succeeded"] [data-testid="job-live-outcome"]')`)
	outcome, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="job-live-outcome"]`)))
	if err != nil || !strings.Contains(outcome, "Succeeded on attempt 2") {
		t.Fatalf("outcome: %q %v", outcome, err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true && !document.querySelector('[data-testid="job-live"][hx-trigger]')`))
	if err != nil || !marker {
		t.Fatalf("page reloaded or still polling (ok=%v, err=%v)", marker, err)
	}
	// The page's other copies of the state and attempts follow too.
	agree, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#job-state-head .succeeded') &&
		!!document.querySelector('#job-state-meta .succeeded') && document.querySelector('#job-attempts').textContent.includes('2')`))
	if err != nil || !agree {
		t.Fatalf("the header or metadata still show the old state (ok=%v, err=%v)", agree, err)
	}
	browsertest.Screenshot(t, ctx, "admin-job-followed")

	// The staff job list shows the trace id whole, inside its cell, on a
	// laptop and on a phone.
	var trace string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT trace_id FROM jobs WHERE id = $1`, id).Scan(&trace); err != nil {
		t.Fatal(err)
	}
	for _, w := range widths {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(f.srv.URL+"/admin/jobs?queue="+replayQueue),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-trace"]`))); err != nil {
			t.Fatalf("staff jobs @%d: %v", w, err)
		}
		whole, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			const a = document.querySelector('[data-testid="job-trace"]');
			const cell = a.closest('td').getBoundingClientRect(), r = a.getBoundingClientRect();
			return a.textContent.trim() === %q && r.left >= cell.left - 1 && r.right <= cell.right + 1 &&
				r.right <= window.innerWidth && %s;
		})()`, trace, noSideways)))
		if err != nil || !whole {
			t.Errorf("@%d: trace id %s not shown whole in its cell (%v)", w, trace, err)
		}
		browsertest.Screenshot(t, ctx, fmt.Sprintf("admin-jobs-trace-%d", w))
	}
}

// rowsOneLine is true when every tenant job row is one line of text tall
// (its height at most its cells' padding plus 1.6 line heights) and no
// state badge wraps.
const rowsOneLine = `(() => {
	const rows = [...document.querySelectorAll('tr[data-testid="job"]')];
	return rows.length > 0 && rows.every(r => {
		const cs = getComputedStyle(r.cells[0]);
		const line = parseFloat(cs.lineHeight) || parseFloat(cs.fontSize) * 1.5;
		const pad = parseFloat(cs.paddingTop) + parseFloat(cs.paddingBottom);
		return r.getBoundingClientRect().height <= pad + 1.6 * line;
	});
})()`

// badgesWhole is true when no state badge of the jobs table breaks over
// two lines.
const badgesWhole = `[...document.querySelectorAll('tr[data-testid="job"] .badge')].every(b => b.getClientRects().length === 1)`

// noSideways is true when the page is no wider than the window.
const noSideways = `document.documentElement.scrollWidth <= window.innerWidth`

// TestBrowserTenantJobsOneLinePerJob: at 1360 px every job is one line
// (long errors end in an ellipsis, badges whole) and the page fits; at
// 390 px the rows stack without any sideways scroll.
func TestBrowserTenantJobsOneLinePerJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := "smtp 550 5.1.1 <owner@toko-bunga-melati.example>: recipient address rejected: user unknown in virtual mailbox table " +
		strings.Repeat("and more detail ", 10)
	f.makeDead(melati, "email.weekly-report", 2, long)
	f.enqueueMany(melati, "payment.charge", 4)
	held := f.claimAll("test-worker")
	for i, j := range held {
		if i%2 == 0 {
			f.complete("test-worker", j)
		} else {
			f.fail("test-worker", j, errors.New("upstream 503 from the payment provider while charging the card"))
		}
	}
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	for _, w := range widths {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(f.srv.URL+"/t/"+melati+"/jobs"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="job"]`))); err != nil {
			t.Fatalf("jobs @%d: %v", w, err)
		}
		browsertest.Wait(t, ctx, fmt.Sprintf("jobs @%d settled", w), `document.readyState === "complete"`)
		browsertest.Screenshot(t, ctx, fmt.Sprintf("tenant-jobs-%d", w))
		checks := map[string]string{"page scrolls sideways": noSideways, "a state badge wraps": badgesWhole}
		if w >= 700 {
			checks["a job row is taller than one line"] = rowsOneLine
		}
		for what, js := range checks {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			if err != nil || !ok {
				t.Errorf("@%d: %s (%v)", w, what, err)
			}
		}
		counts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="tab-count"]').length`))
		if err != nil || counts != 6 {
			t.Errorf("@%d: %d tab counts (%v)", w, counts, err)
		}
	}
}
