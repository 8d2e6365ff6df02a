package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
)

// widths are the screens every page is checked at: a laptop and a phone.
var widths = []int64{1360, 390}

// checkPage loads path and, at each width, saves a screenshot, runs axe
// (no serious or critical violation allowed), and at phone width checks
// that nothing overflows sideways (tables stack, the navigation folds
// away). The page is loaded once: its HTML does not depend on the screen
// (no script of ours reads the width), so the second width is the same
// document laid out again, as when a window is resized.
func checkPage(t *testing.T, ctx context.Context, base, who, path string) {
	t.Helper()
	for i, w := range widths {
		name := fmt.Sprintf("%s %s @%d", who, path, w)
		load := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(w, 900)}
		if i == 0 {
			load = append(load, chromedp.Navigate(base+path), chromedp.WaitReady(chromedp.CSS(`main`)))
		}
		if err := chromedp.Do(ctx, load...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		browsertest.Wait(t, ctx, name+" laid out", `document.readyState === "complete" && window.innerWidth === `+strconv.FormatInt(w, 10))
		browsertest.Screenshot(t, ctx, fmt.Sprintf("%s%s-%d", who, strings.NewReplacer("/", "_", "?", "_", "=", "_", "&", "_").Replace(path), w))
		browsertest.AxeClean(t, ctx, name)
		if w >= 700 {
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll(".nav-menu nav a")].every(a => a.checkVisibility())`))
			if err != nil || !shown {
				t.Errorf("%s: navigation hidden on a wide screen (%v)", name, err)
			}
		}
		if stuck := unreachableScrollers(t, ctx, name); len(stuck) > 0 {
			t.Errorf("%s: scrollable regions a keyboard cannot reach: %v", name, stuck)
		}
		overlaps, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg.chart")].flatMap(svg => {
			const ts = [...svg.querySelectorAll("text")].filter(e => e.checkVisibility()).map(e => [e.textContent, e.getBoundingClientRect()]);
			const out = [];
			ts.forEach(([a, r], i) => ts.slice(i + 1).forEach(([b, q]) => {
				if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) out.push(a + " / " + b);
			}));
			return out;
		}).slice(0, 5)`))
		if err != nil || len(overlaps) > 0 {
			t.Errorf("%s: chart labels overlap: %v (%v)", name, overlaps, err)
		}
		if small := smallText(t, ctx, name); len(small) > 0 {
			t.Errorf("%s: text under 12 px: %v", name, small)
		}
		if w < 700 {
			if unlabelled := unlabelledCells(t, ctx, name); len(unlabelled) > 0 {
				t.Errorf("%s: stacked table cells without a label: %v", name, unlabelled)
			}
			width, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
			if err != nil || len(width) != 2 || width[0] > width[1] {
				t.Errorf("%s: the document is %v px wide (document, viewport) (%v)", name, width, err)
			}
			over, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")]
				.filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest("pre, .chart-table, svg, thead, .sr-only, details:not([open])"))
				.slice(0, 5).map(e => e.tagName + "." + e.className)`))
			if err != nil {
				t.Fatalf("%s overflow check: %v", name, err)
			}
			if len(over) > 0 {
				t.Errorf("%s: wider than the screen: %v", name, over)
			}
		}
	}
}

// unreachableScrollers lists regions that scroll (their content is larger
// than their box and their overflow lets it scroll) but neither take focus
// nor hold anything focusable: a keyboard user cannot scroll them.
func unreachableScrollers(t *testing.T, ctx context.Context, name string) []string {
	t.Helper()
	stuck, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main *")].filter(e => {
		const st = getComputedStyle(e);
		const scrollsX = /auto|scroll/.test(st.overflowX) && e.scrollWidth > e.clientWidth + 1;
		const scrollsY = /auto|scroll/.test(st.overflowY) && e.scrollHeight > e.clientHeight + 1;
		if (!(scrollsX || scrollsY) || !e.checkVisibility()) return false;
		if (e.tabIndex >= 0 && (e.getAttribute("aria-label") || e.getAttribute("aria-labelledby"))) return false;
		return !e.querySelector("a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])");
	}).slice(0, 5).map(e => e.tagName + "." + e.className + " " + e.textContent.trim().slice(0, 30))`))
	if err != nil {
		t.Fatalf("%s scroll scan: %v", name, err)
	}
	return stuck
}

// smallText lists visible text rendered under 12 px: an element's own
// text at its computed size, and SVG text at the size it is drawn (a
// viewBox scales it).
func smallText(t *testing.T, ctx context.Context, name string) []string {
	t.Helper()
	small, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter(e => {
		if (![...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim() !== "")) return false;
		if (e.closest(".sr-only, script, style, title, details:not([open]) > :not(summary)") || !e.checkVisibility()) return false;
		let size = parseFloat(getComputedStyle(e).fontSize);
		if (e instanceof SVGTextElement) {
			const box = e.getBBox(), rect = e.getBoundingClientRect();
			if (box.height > 0) size = size * rect.height / box.height;
		}
		return size < 11.95;
	}).slice(0, 5).map(e => e.tagName + "." + e.getAttribute("class") + " " + e.textContent.trim().slice(0, 30) + " @" + getComputedStyle(e).fontSize)`))
	if err != nil {
		t.Fatalf("%s font-size scan: %v", name, err)
	}
	return small
}

// unlabelledCells lists stacked table cells (display: block on a phone)
// that show text of their own without a data-label saying what it is; a
// cell holding only a link, button or form names itself.
func unlabelledCells(t *testing.T, ctx context.Context, name string) []string {
	t.Helper()
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main td")].filter(td => {
		if (td.hasAttribute("data-label") || td.hasAttribute("colspan") || !td.checkVisibility()) return false;
		if (getComputedStyle(td).display === "table-cell") return false;
		const c = td.cloneNode(true);
		c.querySelectorAll("a, button, form, select").forEach(e => e.remove());
		return c.textContent.trim() !== "";
	}).slice(0, 5).map(td => (td.closest("table").dataset.testid || "table") + ": " + td.textContent.trim().slice(0, 30))`))
	if err != nil {
		t.Fatalf("%s label scan: %v", name, err)
	}
	return cells
}

// TestBrowserEveryPageAtTwoWidthsPassesAxe walks every owner and staff
// page at 1360 and 390 px with axe-core, in English and Indonesian.
func TestBrowserEveryPageAtTwoWidthsPassesAxe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := demo.SeedHistory(context.Background(), f.db.System, clock.Database{}); err != nil {
		t.Fatal(err)
	}
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 2, "smtp 550 mailbox unavailable")
	hook, _ := f.webhookWithDelivery("toko-bunga-melati")
	project := f.projectID("toko-bunga-melati", "Katalog Musim Hujan")
	ctx := browsertest.New(t)

	checkPage(t, ctx, f.srv.URL, "anonymous", "/login")
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	for _, p := range []string{"/t/toko-bunga-melati/", "/t/toko-bunga-melati/audit", "/t/toko-bunga-melati/audit?action=project.delete",
		fmt.Sprintf("/t/toko-bunga-melati/audit/project/%d", project), "/t/toko-bunga-melati/jobs", "/t/toko-bunga-melati/jobs?state=dead",
		"/t/toko-bunga-melati/members", "/t/toko-bunga-melati/audit?from=bad", "/invitations", "/t/toko-bunga-melati/webhooks", fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", hook), "/t/toko-bunga-melati/billing"} {
		checkPage(t, ctx, f.srv.URL, "owner", p)
	}
	// The same owner in Indonesian.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900), chromedp.Navigate(f.srv.URL+"/t/toko-bunga-melati/"),
		chromedp.Click(chromedp.CSS(`[data-testid="locale-id"]`)),
		chromedp.WaitReady(chromedp.CSS(`html[lang="id"]`))); err != nil {
		t.Fatalf("switch to Indonesian: %v", err)
	}
	for _, p := range []string{"/t/toko-bunga-melati/", "/t/toko-bunga-melati/audit", "/t/toko-bunga-melati/members"} {
		checkPage(t, ctx, f.srv.URL, "pemilik", p)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/login")); err != nil {
		t.Fatal(err)
	}
	// Staff.
	staff := browsertest.New(t)
	if err := signIn(staff, f.srv.URL, "admin@jejak.test"); err != nil {
		t.Fatalf("sign in staff: %v", err)
	}
	for _, p := range []string{"/admin", "/admin/jobs", fmt.Sprintf("/admin/jobs/%d", dead[0]), "/admin/dead",
		"/admin/dead/bulk?action=retry", "/admin/search", "/admin/search?trace=demo", "/admin/outbox", "/admin/tenants",
		"/admin/tenants/toko-bunga-melati", "/admin/approvals", "/admin/alerts"} {
		checkPage(t, staff, f.srv.URL, "staff", p)
	}
}
