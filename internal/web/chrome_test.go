package web_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestRobotsAndFavicon: crawlers are told to stay out in plain text, and
// /favicon.ico answers with the icon the pages link.
func TestRobotsAndFavicon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	r := c.get("/robots.txt")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") ||
		!strings.Contains(r.body, "User-agent: *\n") || !strings.Contains(r.body, "Disallow: /\n") {
		t.Fatalf("robots.txt: %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	ico := c.get("/favicon.ico")
	if ico.status != http.StatusOK || ico.header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(ico.body, "<svg") {
		t.Fatalf("favicon.ico: %d %q", ico.status, ico.header.Get("Content-Type"))
	}
	login := c.get("/login")
	m := regexp.MustCompile(`<link rel="icon" type="image/svg\+xml" href="([^"]+)"`).FindStringSubmatch(login.body)
	if m == nil {
		t.Fatalf("the sign-in page links no icon")
	}
	if linked := c.get(m[1]); linked.status != http.StatusOK || linked.body != ico.body {
		t.Fatalf("linked icon %s: %d, same as /favicon.ico: %v", m[1], linked.status, linked.body == ico.body)
	}
}

// getGzip fetches path asking for gzip (the transport then leaves the body
// compressed) and returns the Content-Encoding and the decoded body.
func getGzip(t *testing.T, c *client, path string) (status int, encoding, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.f.srv.URL+path, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	var rd io.Reader = res.Body
	if enc := res.Header.Get("Content-Encoding"); enc == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatalf("GET %s: not gzip: %v", path, err)
		}
		rd = zr
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("GET %s: read: %v", path, err)
	}
	return res.StatusCode, res.Header.Get("Content-Encoding"), string(b)
}

// TestHTMLCSSAndJSAreCompressed: pages, the stylesheet and scripts are
// gzipped for a client that accepts it; the audit export (a streamed
// download) and /metrics are left alone.
func TestHTMLCSSAndJSAreCompressed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	home := c.get("/t/toko-bunga-melati/")
	assets := regexp.MustCompile(`(?:href|src)="(/static/[^"]+\.(?:css|js)[^"]*)"`).FindAllStringSubmatch(home.body, -1)
	if len(assets) < 3 {
		t.Fatalf("expected the stylesheet, htmx and idiomorph on the page, found %v", assets)
	}
	paths := []string{"/t/toko-bunga-melati/", "/t/toko-bunga-melati/audit"}
	for _, a := range assets {
		paths = append(paths, a[1])
	}
	for _, p := range paths {
		status, enc, body := getGzip(t, c, p)
		if status != http.StatusOK || enc != "gzip" || len(body) < 1024 {
			t.Errorf("%s: status %d, Content-Encoding %q, %d bytes decoded", p, status, enc, len(body))
		}
	}
	if status, enc, body := getGzip(t, c, "/t/toko-bunga-melati/audit/export.csv"); status != http.StatusOK || enc != "" || !strings.Contains(body, ",") {
		t.Errorf("export: status %d, Content-Encoding %q", status, enc)
	}
	if status, _, body := getGzip(t, c, "/metrics"); status != http.StatusOK || !strings.Contains(body, "# TYPE ") {
		t.Errorf("metrics with gzip: status %d, body %.200q", status, body)
	}
	// An error page is written after the handler gave up (nothing of its
	// own written): it still arrives whole and readable.
	if status, _, body := getGzip(t, c, "/t/toko-bunga-melati/no-such"); status != http.StatusNotFound || !strings.Contains(body, `data-testid="error-explanation"`) {
		t.Errorf("404 with gzip: status %d, body %.300q", status, body)
	}
	// A short answer is not worth compressing.
	if status, enc, body := getGzip(t, c, "/healthz"); status != http.StatusOK || enc != "" || body == "" {
		t.Errorf("healthz with gzip: status %d, Content-Encoding %q, body %q", status, enc, body)
	}
}

// TestRefusedAndMissingPagesKeepTheNavigation: a member refused a page, or
// asking for one that does not exist, stays inside the tenant's navigation
// and is told in a sentence what happened; another tenant's URL shows no
// trace of that tenant.
func TestRefusedAndMissingPagesKeepTheNavigation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	member := f.client()
	member.login("rina@melati.test")
	nav := `href="/t/toko-bunga-melati/audit"`
	for path, want := range map[string]int{
		"/t/toko-bunga-melati/webhooks":   http.StatusForbidden,
		"/t/toko-bunga-melati/no-such":    http.StatusNotFound,
		"/t/toko-bunga-melati/audit/x/y/": http.StatusNotFound,
	} {
		a := member.get(path)
		if a.status != want || !strings.Contains(a.body, nav) || !strings.Contains(a.body, `data-testid="error-explanation"`) ||
			!strings.Contains(a.body, `data-testid="error-back" href="/t/toko-bunga-melati/"`) && !strings.Contains(a.body, `href="/t/toko-bunga-melati/" data-testid="error-back"`) {
			t.Errorf("%s: status %d (want %d), nav %v, body %.2000s", path, a.status, want, strings.Contains(a.body, nav), a.body)
		}
	}
	if a := member.get("/t/toko-bunga-melati/webhooks"); !strings.Contains(a.body, "role does not allow") || !strings.Contains(a.body, "Only owners and admins manage webhooks.") {
		t.Errorf("403 page does not say what happened: %.3000s", a.body)
	}
	staff := f.client()
	staff.login("support@jejak.test")
	for _, path := range []string{"/admin/no-such-page", "/no-such-page"} {
		if a := staff.get(path); a.status != http.StatusNotFound || !strings.Contains(a.body, `href="/admin/dead"`) || !strings.Contains(a.body, `data-testid="error-explanation"`) {
			t.Errorf("staff %s: %d, staff navigation %v", path, a.status, strings.Contains(a.body, `href="/admin/dead"`))
		}
	}
	other := member.get("/t/kopi-senja/")
	if other.status != http.StatusNotFound || strings.Contains(other.body, "/t/kopi-senja/audit") || !strings.Contains(other.body, "nothing at this address") {
		t.Errorf("another tenant's page: %d %.2000s", other.status, other.body)
	}
}

var navLinks = regexp.MustCompile(`(?s)<nav aria-label="[^"]*">(.*?)</nav>`)
var hrefs = regexp.MustCompile(`href="([^"]+)"`)

// TestNavigationOffersOnlyUsablePages: every link in the navigation of a
// read-only member, an owner and support staff opens (no 403 behind a link
// someone was offered).
func TestNavigationOffersOnlyUsablePages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for who, start := range map[string]string{"rina@melati.test": "/t/toko-bunga-melati/", "budi@melati.test": "/t/toko-bunga-melati/", "support@jejak.test": "/admin"} {
		c := f.client()
		c.login(who)
		home := c.get(start)
		m := navLinks.FindStringSubmatch(home.body)
		if home.status != http.StatusOK || m == nil {
			t.Fatalf("%s %s: %d, navigation found %v", who, start, home.status, m != nil)
		}
		links := hrefs.FindAllStringSubmatch(m[1], -1)
		if len(links) < 3 {
			t.Fatalf("%s: navigation has %d links", who, len(links))
		}
		for _, l := range links {
			if a := c.get(l[1]); a.status != http.StatusOK {
				t.Errorf("%s: nav link %s answers %d", who, l[1], a.status)
			}
		}
	}
}

// TestLanguageChooserSwitchesInOneClick: the chooser is one button per
// language, each posting /locale with its own value (no select plus a
// second "change" button), and pressing one switches the page.
func TestLanguageChooserSwitchesInOneClick(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	login := c.get("/login")
	form := regexp.MustCompile(`(?s)<form class="lang" method="post" action="/locale".*?</form>`).FindString(login.body)
	buttons := regexp.MustCompile(`<button type="submit" name="locale" value="(id|en)"`).FindAllStringSubmatch(form, -1)
	if len(buttons) != 2 || strings.Contains(form, "<select") {
		t.Fatalf("chooser: %d language buttons, has a select: %v\n%s", len(buttons), strings.Contains(form, "<select"), form)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/locale", strings.NewReader("locale=id&_csrf="+c.csrf()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", f.srv.URL+"/login")
	if a := c.do(req); a.status != http.StatusSeeOther || a.location != "/login" {
		t.Fatalf("pressing Bahasa Indonesia: %d → %q", a.status, a.location)
	}
	if a := c.get("/login"); !strings.Contains(a.body, `<html lang="id">`) || !strings.Contains(a.body, `value="id" lang="id" aria-pressed="true"`) {
		t.Fatalf("after one click the page is not Indonesian")
	}
}
