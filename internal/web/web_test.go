package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSignIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	cases := []struct {
		name, email, password string
		status                int
		location, bodyHas     string
	}{
		{"owner", "budi@melati.test", "jejak-demo", http.StatusSeeOther, "/", ""},
		{"staff", "support@jejak.test", "jejak-demo", http.StatusSeeOther, "/admin", ""},
		{"e-mail is case-insensitive", "  Budi@Melati.TEST ", "jejak-demo", http.StatusSeeOther, "/", ""},
		{"bad password", "budi@melati.test", "wrong", http.StatusUnauthorized, "", "Invalid e-mail or password."},
		{"unknown user", "nobody@melati.test", "jejak-demo", http.StatusUnauthorized, "", "Invalid e-mail or password."},
		{"empty", "", "", http.StatusUnprocessableEntity, "", "Enter your e-mail and password."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.client()
			a := c.post("/login", c.withCSRF(url.Values{"email": {tc.email}, "password": {tc.password}}), false)
			if a.status != tc.status || a.location != tc.location || !strings.Contains(a.body, tc.bodyHas) {
				t.Fatalf("got %d location=%q, want %d %q containing %q; body: %.300s", a.status, a.location, tc.status, tc.location, tc.bodyHas, a.body)
			}
			signedIn := c.get("/").status == http.StatusSeeOther && c.get("/").location != "/login"
			if signedIn != (tc.status == http.StatusSeeOther) {
				t.Fatalf("signed in = %v after status %d", signedIn, a.status)
			}
		})
	}
}

func TestOwnerLandsOnTenantAndSeesProjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	a := c.get("/")
	if a.status != http.StatusSeeOther || a.location != "/t/toko-bunga-melati/" {
		t.Fatalf("start: %d %q", a.status, a.location)
	}
	home := c.get("/t/toko-bunga-melati/")
	if home.status != http.StatusOK || !strings.Contains(home.body, "Katalog Musim Hujan") || strings.Contains(home.body, "Menu Musim Kemarau") {
		t.Fatalf("tenant home: %d, body lacks own project or shows another tenant's: %.500s", home.status, home.body)
	}
	if csp := home.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP: %q", csp)
	}
	if strings.Contains(home.body, "<script>") {
		t.Fatal("page has an inline script")
	}
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	a := c.get("/login")
	cookie := a.header.Get("Set-Cookie")
	if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") {
		t.Fatalf("session cookie flags: %q", cookie)
	}
}

func TestCSRFRequiredOnEveryPost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	// Sign-in itself needs the token.
	a := c.post("/login", url.Values{"email": {"budi@melati.test"}, "password": {"jejak-demo"}}, false)
	if a.status != http.StatusForbidden {
		t.Fatalf("sign-in without token: %d", a.status)
	}
	c.login("budi@melati.test")
	before := f.count("SELECT count(*) FROM projects")
	id := f.projectID("toko-bunga-melati", "Katalog Musim Hujan")
	for _, tc := range []struct {
		path  string
		token string
	}{
		{"/t/toko-bunga-melati/projects", ""},
		{"/t/toko-bunga-melati/projects", "forged"},
		{fmt.Sprintf("/t/toko-bunga-melati/projects/%d/delete", id), ""},
		{"/logout", ""},
	} {
		form := url.Values{"name": {"Sneaky"}}
		if tc.token != "" {
			form.Set("_csrf", tc.token)
		}
		for _, htmx := range []bool{false, true} {
			if a := c.post(tc.path, form, htmx); a.status != http.StatusForbidden || !strings.Contains(a.body, "CSRF") {
				t.Errorf("POST %s token=%q htmx=%v: %d", tc.path, tc.token, htmx, a.status)
			}
		}
	}
	if after := f.count("SELECT count(*) FROM projects"); after != before {
		t.Fatalf("projects changed without a CSRF token: %d → %d", before, after)
	}
	// Still signed in: sign-out without a token was refused.
	if a := c.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("session lost: %d", a.status)
	}
}

func TestCrossTenantAccessIs404(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	before := f.count("SELECT count(*) FROM projects")
	senjaProject := f.projectID("kopi-senja", "Menu Musim Kemarau")

	gets := []string{"/t/kopi-senja/", "/t/kopi-senja", "/t/no-such-tenant/", "/t/batik-nusantara/"}
	for _, p := range gets {
		a := c.get(p)
		if p == "/t/kopi-senja" && a.status == http.StatusMovedPermanently {
			a = c.get(a.location)
		}
		if a.status != http.StatusNotFound || strings.Contains(a.body, "Kopi Senja") || strings.Contains(a.body, "Menu Musim") {
			t.Errorf("GET %s: %d (must be 404 and leak nothing)", p, a.status)
		}
	}
	posts := []string{
		"/t/kopi-senja/projects",
		fmt.Sprintf("/t/kopi-senja/projects/%d/delete", senjaProject),
		// Own slug, another tenant's project id.
		fmt.Sprintf("/t/toko-bunga-melati/projects/%d/delete", senjaProject),
		"/t/toko-bunga-melati/projects/abc/delete",
	}
	for _, p := range posts {
		for _, htmx := range []bool{false, true} {
			if a := c.post(p, c.withCSRF(url.Values{"name": {"Intruder"}}), htmx); a.status != http.StatusNotFound {
				t.Errorf("POST %s htmx=%v: %d, want 404", p, htmx, a.status)
			}
		}
	}
	if after := f.count("SELECT count(*) FROM projects"); after != before {
		t.Fatalf("cross-tenant request changed projects: %d → %d", before, after)
	}
}

func TestProjectCreateAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	const home = "/t/toko-bunga-melati/"

	// With htmx: the projects section comes back with the new project.
	a := c.post(home+"projects", c.withCSRF(url.Values{"name": {"  Pameran Anggrek  "}}), true)
	if a.status != http.StatusOK || !strings.Contains(a.body, `id="projects"`) || !strings.Contains(a.body, "Pameran Anggrek") || strings.Contains(a.body, "<html") {
		t.Fatalf("htmx create: %d %.400s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM projects WHERE name = 'Pameran Anggrek'`); n != 1 {
		t.Fatalf("created %d rows (name must be trimmed)", n)
	}
	// Without JavaScript: post, redirect, get.
	a = c.post(home+"projects", c.withCSRF(url.Values{"name": {"Buket Valentine"}}), false)
	if a.status != http.StatusSeeOther || a.location != home {
		t.Fatalf("form create: %d %q", a.status, a.location)
	}
	if !strings.Contains(c.get(home).body, "Buket Valentine") {
		t.Fatal("created project not listed")
	}
	// Validation: error next to the field, 422, nothing written.
	before := f.count("SELECT count(*) FROM projects")
	for _, bad := range []string{"", "   ", strings.Repeat("x", 121)} {
		for _, htmx := range []bool{true, false} {
			a = c.post(home+"projects", c.withCSRF(url.Values{"name": {bad}}), htmx)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error"`) {
				t.Fatalf("invalid name %q htmx=%v: %d %.300s", bad, htmx, a.status, a.body)
			}
		}
	}
	if after := f.count("SELECT count(*) FROM projects"); after != before {
		t.Fatalf("invalid input wrote projects: %d → %d", before, after)
	}
	// Delete, with and without htmx.
	id := f.projectID("toko-bunga-melati", "Pameran Anggrek")
	a = c.post(fmt.Sprintf("%sprojects/%d/delete", home, id), c.withCSRF(nil), true)
	if a.status != http.StatusOK || strings.Contains(a.body, "Pameran Anggrek") {
		t.Fatalf("htmx delete: %d %.300s", a.status, a.body)
	}
	id = f.projectID("toko-bunga-melati", "Buket Valentine")
	a = c.post(fmt.Sprintf("%sprojects/%d/delete", home, id), c.withCSRF(nil), false)
	if a.status != http.StatusSeeOther {
		t.Fatalf("form delete: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM projects WHERE name IN ('Pameran Anggrek', 'Buket Valentine')`); n != 0 {
		t.Fatalf("%d deleted projects remain", n)
	}
	// Deleting again is a 404, not a silent success.
	if a = c.post(fmt.Sprintf("%sprojects/%d/delete", home, id), c.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Fatalf("second delete: %d", a.status)
	}
}

func TestMemberIsReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("rina@melati.test")
	home := c.get("/t/toko-bunga-melati/")
	if home.status != http.StatusOK || strings.Contains(home.body, `data-testid="project-form"`) || !strings.Contains(home.body, "Katalog Musim Hujan") {
		t.Fatalf("member home: %d (must list projects without a form)", home.status)
	}
	before := f.count("SELECT count(*) FROM projects")
	id := f.projectID("toko-bunga-melati", "Katalog Musim Hujan")
	if a := c.post("/t/toko-bunga-melati/projects", c.withCSRF(url.Values{"name": {"X"}}), false); a.status != http.StatusForbidden {
		t.Fatalf("member create: %d", a.status)
	}
	if a := c.post(fmt.Sprintf("/t/toko-bunga-melati/projects/%d/delete", id), c.withCSRF(nil), false); a.status != http.StatusForbidden {
		t.Fatalf("member delete: %d", a.status)
	}
	if after := f.count("SELECT count(*) FROM projects"); after != before {
		t.Fatal("member changed projects")
	}
}

func TestRouteGuards(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	anon := f.client()
	for _, p := range []string{"/", "/t/toko-bunga-melati/", "/admin"} {
		if a := anon.get(p); a.status != http.StatusSeeOther || a.location != "/login" {
			t.Errorf("anonymous GET %s: %d %q", p, a.status, a.location)
		}
	}
	owner := f.client()
	owner.login("budi@melati.test")
	if a := owner.get("/admin"); a.status != http.StatusForbidden {
		t.Errorf("owner GET /admin: %d", a.status)
	}
	for _, email := range []string{"support@jejak.test", "admin@jejak.test"} {
		staff := f.client()
		staff.login(email)
		if a := staff.get("/admin"); a.status != http.StatusOK || !strings.Contains(a.body, `data-testid="admin-home"`) {
			t.Errorf("%s GET /admin: %d", email, a.status)
		}
		// Staff are not tenant members: tenant pages stay 404.
		if a := staff.get("/t/toko-bunga-melati/"); a.status != http.StatusNotFound {
			t.Errorf("%s GET tenant page: %d", email, a.status)
		}
	}
}

func TestSignOutEndsSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	if a := c.post("/logout", c.withCSRF(nil), false); a.status != http.StatusSeeOther || a.location != "/login" {
		t.Fatalf("logout: %d %q", a.status, a.location)
	}
	if a := c.get("/t/toko-bunga-melati/"); a.status != http.StatusSeeOther || a.location != "/login" {
		t.Fatalf("after logout: %d %q", a.status, a.location)
	}
}

func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	for i := 0; i < 5; i++ {
		if a := c.post("/login", c.withCSRF(url.Values{"email": {"sari@senja.test"}, "password": {"guess"}}), false); a.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, a.status)
		}
	}
	// Even the right password is refused while throttled.
	a := c.post("/login", c.withCSRF(url.Values{"email": {"sari@senja.test"}, "password": {"jejak-demo"}}), false)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("throttled attempt: %d retry-after=%q", a.status, a.header.Get("Retry-After"))
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	if a := c.get("/healthz"); a.status != http.StatusOK {
		t.Fatalf("healthz: %d", a.status)
	}
	if a := c.get("/readyz"); a.status != http.StatusOK || a.body != "ready" {
		t.Fatalf("readyz: %d %q", a.status, a.body)
	}
	f.db.App.Close() // database gone
	if a := c.get("/readyz"); a.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz without database: %d", a.status)
	}
}
