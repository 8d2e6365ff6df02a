package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/browsertest"
	"github.com/jejakhq/jejak/internal/demo"
)

// signIn drives the real sign-in form.
func signIn(ctx context.Context, base, email string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.SendKeys(chromedp.CSS(`#password`), demo.Password),
		chromedp.Submit(chromedp.CSS(`#password`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="viewer"]`)),
	)
}

// TestBrowserCreateProjectWithHTMX signs in as budi in a real Chromium,
// creates a project through the htmx form and checks it appears without a
// full page load: a marker set on window before submitting must survive.
// Without htmx (or with a broken handler) the form would navigate and the
// marker would be gone.
func TestBrowserCreateProjectWithHTMX(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasSuffix(loc, "/t/toko-bunga-melati/") {
		t.Fatalf("landed on %q (%v)", loc, err)
	}
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true`))
	if err != nil {
		t.Fatalf("set marker: %v", err)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#project-name`), "Rangkaian Pernikahan"),
		chromedp.Click(chromedp.CSS(`[data-testid="project-form"] button[type=submit]`)),
	)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	browsertest.Wait(t, ctx, "new project in the list",
		`[...document.querySelectorAll('[data-testid="project"]')].some(li => li.textContent.includes('Rangkaian Pernikahan'))`)
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`))
	if err != nil || !marker {
		t.Fatalf("the page was fully reloaded (marker lost=%v, err=%v): htmx did not swap in place", !marker, err)
	}
	if n := f.count(`SELECT count(*) FROM projects WHERE name = 'Rangkaian Pernikahan'`); n != 1 {
		t.Fatalf("database has %d such projects", n)
	}
	// The form is fresh again for the next project.
	val, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#project-name`)))
	if err != nil || val != "" {
		t.Fatalf("form not reset: %q %v", val, err)
	}
}
