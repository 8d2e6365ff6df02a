package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSkipWanted: only JEJAK_SKIP_BROWSER=1 skips, and never under CI.
func TestSkipWanted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		env        map[string]string
		skip, fail bool
	}{
		{"nothing set", nil, false, false},
		{"make check", map[string]string{SkipEnv: "1"}, true, false},
		{"other value", map[string]string{SkipEnv: "true"}, false, false},
		{"CI alone", map[string]string{"CI": "true"}, false, false},
		{"CI refuses the skip", map[string]string{SkipEnv: "1", "CI": "true"}, false, true},
		{"CI=1 refuses the skip", map[string]string{SkipEnv: "1", "CI": "1"}, false, true},
		{"CI=false allows it", map[string]string{SkipEnv: "1", "CI": "false"}, true, false},
	} {
		skip, reason := skipWanted(func(k string) string { return c.env[k] })
		if skip != c.skip || (!skip && reason != "") != c.fail {
			t.Errorf("%s: skip=%v reason=%q, want skip=%v fail=%v", c.name, skip, reason, c.skip, c.fail)
		}
	}
}

// TestBrowserTabsShareNoCookies: tabs of the one shared Chromium are in
// browser contexts of their own, so a session cookie one test's tab gets
// is not sent by another's.
func TestBrowserTabsShareNoCookies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "first-tab", Path: "/"})
		}
		c, _ := r.Cookie("session")
		v := "none"
		if c != nil {
			v = c.Value
		}
		fmt.Fprintf(w, "<html><body><main id=cookie>%s</main></body></html>", v)
	}))
	defer srv.Close()
	read := func(ctx context.Context, path string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path)); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("cookie").textContent`))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return got
	}
	first, second := New(t), New(t)
	read(first, "/set")
	if got := read(first, "/get"); got != "first-tab" {
		t.Fatalf("the first tab lost its own cookie: %q", got)
	}
	if got := read(second, "/get"); got != "none" {
		t.Fatalf("the second tab sent the first tab's cookie: %q", got)
	}
}
