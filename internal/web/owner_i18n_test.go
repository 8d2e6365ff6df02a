package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
)

func (c *client) getLang(path, acceptLanguage string) answer {
	req, _ := http.NewRequest(http.MethodGet, c.f.srv.URL+path, nil)
	req.Header.Set("Accept-Language", acceptLanguage)
	return c.do(req)
}

// TestAcceptLanguageChoosesTheLanguage: Accept-Language id gives
// <html lang="id"> and Indonesian text, en gives English; a choice saved
// on the account wins over the browser's.
func TestAcceptLanguageChoosesTheLanguage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	anon := f.client()
	for _, tc := range []struct{ header, lang, want, not string }{
		{"id-ID,id;q=0.9", "id", "Masuk ke Jejak", "Sign in to Jejak"},
		{"en-US,en;q=0.8", "en", "Sign in to Jejak", "Masuk ke Jejak"},
		{"", "en", "Sign in to Jejak", "Masuk ke Jejak"},
	} {
		a := anon.getLang("/login", tc.header)
		if a.status != http.StatusOK || !strings.Contains(a.body, `<html lang="`+tc.lang+`">`) ||
			!strings.Contains(a.body, tc.want) || strings.Contains(a.body, tc.not) {
			t.Fatalf("Accept-Language %q: %d, want lang=%s with %q: %.400s", tc.header, a.status, tc.lang, tc.want, a.body)
		}
	}

	c := f.client()
	c.login("budi@melati.test")
	for _, tc := range []struct {
		header, lang string
		want         []string
	}{
		{"id", "id", []string{"Jejak audit", "Proyek", "Anggota", "Paket", "aktif", "pemilik"}},
		{"en", "en", []string{"Audit trail", "Projects", "Members", "Plan", "active", "owner"}},
	} {
		a := c.getLang("/t/toko-bunga-melati/", tc.header)
		if !strings.Contains(a.body, `<html lang="`+tc.lang+`">`) {
			t.Fatalf("home with Accept-Language %s: not lang=%s", tc.header, tc.lang)
		}
		for _, w := range tc.want {
			if !strings.Contains(a.body, w) {
				t.Errorf("home in %s lacks %q", tc.lang, w)
			}
		}
	}
	if a := c.getLang("/t/toko-bunga-melati/webhooks", "id"); !strings.Contains(a.body, "Tambah endpoint") || !strings.Contains(a.body, `<html lang="id">`) {
		t.Fatalf("webhooks page in Indonesian: %d", a.status)
	}
	// Error pages too (and still leak nothing of the other tenant).
	if a := c.getLang("/t/kopi-senja/", "id"); a.status != http.StatusNotFound || !strings.Contains(a.body, "Halaman tidak ditemukan.") ||
		!strings.Contains(a.body, `<html lang="id">`) || strings.Contains(a.body, "Kopi Senja") {
		t.Fatalf("Indonesian 404: %d %.300s", a.status, a.body)
	}
	// Validation messages follow the language.
	a := c.postLang("/t/toko-bunga-melati/projects", c.withCSRF(url.Values{"name": {"  "}}), "id")
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "Nama proyek wajib diisi.") {
		t.Fatalf("Indonesian validation: %d %.300s", a.status, a.body)
	}

	// Budi saves English on his account: it wins over an Indonesian browser,
	// in a new session too.
	if a := c.post("/locale", c.withCSRF(url.Values{"locale": {"en"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("save locale: %d", a.status)
	}
	if got := f.count(`SELECT count(*) FROM users WHERE email = 'budi@melati.test' AND locale = 'en'`); got != 1 {
		t.Fatal("locale not saved on the user")
	}
	c2 := f.client()
	c2.login("budi@melati.test")
	if a := c2.getLang("/t/toko-bunga-melati/audit", "id"); !strings.Contains(a.body, `<html lang="en">`) {
		t.Fatal("saved English did not win over Accept-Language id")
	}
	if a := c.post("/locale", c.withCSRF(url.Values{"locale": {"fr"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown locale: %d, want 422", a.status)
	}
	if got := f.count(`SELECT count(*) FROM users WHERE email = 'budi@melati.test' AND locale = 'en'`); got != 1 {
		t.Fatal("a refused locale changed the saved one")
	}
}

func (c *client) postLang(path string, form url.Values, lang string) answer {
	req, _ := http.NewRequest(http.MethodPost, c.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", lang)
	return c.do(req)
}

// TestTimelineTellsTheStory: with the demo history, the timeline answers
// "who deleted Katalog Musim Hujan" and "who downgraded the plan" as
// sentences in the reader's language, under day headings, with relative
// times whose exact moment is in the title, the entity linked, and the
// raw record in <details>.
func TestTimelineTellsTheStory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := demo.SeedHistory(context.Background(), f.db.System, clock.Database{}); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("budi@melati.test")
	deleted := "/t/toko-bunga-melati/audit?action=project.delete"
	downgraded := "/t/toko-bunga-melati/audit?action=subscription.change"
	for _, tc := range []struct {
		lang string
		want []string
	}{
		{"id", []string{
			`Rina Wulandari</span> menghapus proyek <a href="/t/toko-bunga-melati/audit/project/`,
			`>“Katalog Musim Hujan”</a>`,
			`Budi Santoso</span> mengubah <a`, `>paket</a> dari Pro ke Free`,
			`<summary>Rincian</summary>`, "hari lalu", `title="`,
		}},
		{"en", []string{
			`Rina Wulandari</span> deleted project <a href="/t/toko-bunga-melati/audit/project/`,
			`Budi Santoso</span> changed <a`, `>the plan</a> from Pro to Free`,
			`<summary>Details</summary>`, "days ago",
		}},
	} {
		body := squash(c.getLang(deleted, tc.lang).body + c.getLang(downgraded, tc.lang).body)
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s timeline lacks %q", tc.lang, w)
			}
		}
	}
	// Day headings: today first (new events arrive under it), then the days
	// of the events, each once.
	page := c.getLang("/t/toko-bunga-melati/audit", "id").body
	if !strings.Contains(page, `<h2 class="day">Hari ini</h2>`) || !strings.Contains(page, `<h2 class="day">Kemarin</h2>`) {
		t.Errorf("Indonesian day headings missing: %.2000s", page)
	}
	if n := strings.Count(page, `<h2 class="day">Kemarin</h2>`); n != 1 {
		t.Errorf("Kemarin headed %d times", n)
	}
	en := c.getLang("/t/toko-bunga-melati/audit", "en").body
	if !strings.Contains(en, `<h2 class="day">Today</h2>`) || !strings.Contains(en, `<h2 class="day">Yesterday</h2>`) {
		t.Error("English day headings missing")
	}
}

var spaces = regexp.MustCompile(`\s+`)

// squash collapses whitespace runs, as a browser does when it renders.
func squash(s string) string { return spaces.ReplaceAllString(s, " ") }

// TestHomeChartsLinkToTheirDay: the owner's home draws 30 days of activity
// and job outcomes with text alternatives, and a day's bar leads to the
// timeline filtered to that day.
func TestHomeChartsLinkToTheirDay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := demo.SeedHistory(context.Background(), f.db.System, clock.Database{}); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("budi@melati.test")
	home := c.getLang("/t/toko-bunga-melati/", "id").body
	for _, want := range []string{`data-testid="activity-chart"`, `data-testid="jobs-chart"`, "Aktivitas, 30 hari terakhir",
		`aria-describedby="activity-chart-desc"`, "Tampilkan angkanya", `data-testid="activity-chart-table"`} {
		if !strings.Contains(home, want) {
			t.Errorf("home lacks %q", want)
		}
	}
	if n := strings.Count(home, `data-day="`); n != 2*30 {
		t.Errorf("%d day bars, want 60", n)
	}
	// The day Rina deleted the project: its bar links to that day's events.
	var day string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT to_char(occurred_at AT TIME ZONE 'Asia/Jakarta', 'YYYY-MM-DD')
		FROM audit_events WHERE action = 'project.delete' AND detail->>'name' = 'Katalog Musim Hujan'`).Scan(&day); err != nil {
		t.Fatal(err)
	}
	link := `/t/toko-bunga-melati/audit?from=` + day + `&amp;to=` + day
	if !strings.Contains(home, `href="`+link+`"`) {
		t.Fatalf("no bar links to %s", link)
	}
	filtered := squash(c.getLang(strings.ReplaceAll(link, "&amp;", "&"), "en").body)
	if !strings.Contains(filtered, "Rina Wulandari</span> deleted project") || strings.Contains(filtered, "changed <a") {
		t.Fatalf("the day's timeline: %.1500s", filtered)
	}
}

// TestLocaleReturnsOnlyToThisSite: the chooser goes back to the page it was
// on, and never to another site named in the Referer.
func TestLocaleReturnsOnlyToThisSite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	for referer, want := range map[string]string{
		f.srv.URL + "/login?x=1":  "/login?x=1",
		"https://evil.example/t/": "/",
		"":                        "/",
	} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/locale", strings.NewReader(c.withCSRF(url.Values{"locale": {"id"}}).Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		if a := c.do(req); a.status != http.StatusSeeOther || a.location != want {
			t.Errorf("Referer %q: %d → %q, want %q", referer, a.status, a.location, want)
		}
	}
	// The browser remembers the choice before any sign-in.
	if a := c.get("/login"); !strings.Contains(a.body, `<html lang="id">`) {
		t.Fatal("the anonymous choice was not kept")
	}
}

// TestAnonymousLocaleWritesNoSession: an anonymous visitor's language
// choice lives in a cookie, so 50 POST /locale write no session row; the
// choice is honoured on the next page, survives sign-in, and "" goes back
// to the browser's language.
func TestAnonymousLocaleWritesNoSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	token := c.csrf()
	for i := 0; i < 50; i++ {
		lang := []string{"id", "en"}[i%2]
		a := c.post("/locale", url.Values{"_csrf": {token}, "locale": {lang}}, false)
		if a.status != http.StatusSeeOther {
			t.Fatalf("POST /locale %d: %d %.200s", i, a.status, a.body)
		}
	}
	// A stranger without any cookie, too.
	for i := 0; i < 5; i++ {
		s := f.client()
		if a := s.post("/locale", s.withCSRF(url.Values{"locale": {"id"}}), false); a.status != http.StatusSeeOther {
			t.Fatalf("fresh visitor: %d", a.status)
		}
	}
	if n := f.count(`SELECT count(*) FROM sessions`); n != 0 {
		t.Fatalf("anonymous POST /locale wrote %d session rows", n)
	}
	// The last choice was English; the browser asks for Indonesian.
	if a := c.getLang("/login", "id"); !strings.Contains(a.body, `<html lang="en">`) {
		t.Fatal("the anonymous choice was not honoured on the next page")
	}
	c.post("/locale", url.Values{"_csrf": {token}, "locale": {"id"}}, false)
	c.login("rina@melati.test")
	if a := c.getLang("/t/toko-bunga-melati/", "en"); !strings.Contains(a.body, `<html lang="id">`) {
		t.Fatal("the choice made before sign-in was lost at sign-in")
	}
	if a := c.post("/locale", c.withCSRF(url.Values{"locale": {""}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("clear locale: %d", a.status)
	}
	if a := c.getLang("/t/toko-bunga-melati/", "en"); !strings.Contains(a.body, `<html lang="en">`) {
		t.Fatalf("after choosing the browser's language: %d %.200s", a.status, a.body)
	}
}

// TestUnknownActionKeepsTheRawForm: an action without a sentence shows the
// recorded form (actor, action, entity) on its line and no sentence, its
// detail one click away; a known one shows its sentence with the raw form
// behind <details>.
func TestUnknownActionKeepsTheRawForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.record("toko-bunga-melati", nil,
		audit.Event{ActorKind: audit.ActorSystem, Action: "order.paid", Entity: "order", EntityID: "A-1", Detail: []byte(`{"amount": 150000}`)},
		audit.Event{ActorKind: audit.ActorSystem, Action: "report.sent", Entity: "report", EntityID: "2026-W48", Detail: []byte(`{"to": "budi@melati.test"}`)})
	c := f.client()
	c.login("budi@melati.test")
	page := squash(c.getLang("/t/toko-bunga-melati/audit?actor=system", "id").body)
	unknown := page[strings.Index(page, `data-action="order.paid"`):]
	unknown = unknown[:strings.Index(unknown, "</li>")]
	line, _, _ := strings.Cut(unknown, "<details")
	if strings.Contains(unknown, "audit-sentence") || !strings.Contains(line, `<code class="action">order.paid</code>`) {
		t.Fatalf("unknown action not in its raw form: %s", unknown)
	}
	if rec := records(t, c, unknown); len(rec) != 1 || !strings.Contains(rec[0], "&#34;amount&#34;: 150000") {
		t.Fatalf("unknown action's record lacks its detail: %q", rec)
	}
	known := page[strings.Index(page, `data-action="report.sent"`):]
	known = known[:strings.Index(known, "</li>")]
	if !strings.Contains(known, "Sistem</span> mengirim laporan mingguan") || !strings.Contains(known, "<summary>Rincian</summary>") {
		t.Fatalf("known action: %s", known)
	}
}

var thirtyDayTotal = regexp.MustCompile(`; (\d+) (?:events?|peristiwa) (?:in|dalam) 30`)

// TestHomeChartsFollowTheirFigures: the home's charts are kept rendered
// between requests, yet a sealed new event shows at once, each language
// gets its own words, and each tenant its own links.
func TestHomeChartsFollowTheirFigures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seal()
	c := f.client()
	c.login("budi@melati.test")
	total := func(lang string) (int, string) {
		t.Helper()
		body := c.getLang("/t/toko-bunga-melati/", lang).body
		m := thirtyDayTotal.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s: no 30-day total in the home: %.2000s", lang, body)
		}
		n, _ := strconv.Atoi(m[1])
		return n, body
	}
	before, _ := total("en")
	if again, _ := total("en"); again != before {
		t.Fatalf("the same figures read %d, then %d", before, again)
	}
	if a := c.post("/t/toko-bunga-melati/projects", c.withCSRF(url.Values{"name": {"Katalog Kemarau"}}), false); a.status >= 400 {
		t.Fatalf("create: %d %.300s", a.status, a.body)
	}
	f.seal()
	after, _ := total("en")
	if after <= before {
		t.Fatalf("30-day total %d after a new event, %d before", after, before)
	}
	if id, body := total("id"); id != after || !strings.Contains(body, "peristiwa dalam 30 hari") {
		t.Fatalf("in Indonesian: a total of %d (want %d), or not in Indonesian words", id, after)
	}
	// Two new tenants of one owner: thirty days of nothing each, the same
	// figures, and each home's bars lead to its own timeline.
	budi := f.userID("budi@melati.test")
	for _, slug := range []string{"kembar-satu", "kembar-dua"} {
		if _, err := f.db.Admin.Exec(context.Background(), `WITH t AS (INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id)
			INSERT INTO memberships (tenant_id, user_id, role) SELECT id, $2, 'owner' FROM t`, slug, budi); err != nil {
			t.Fatal(err)
		}
		home := c.getLang("/t/"+slug+"/", "en").body
		if !strings.Contains(home, `href="/t/`+slug+`/audit?from=`) || strings.Contains(home, "/t/kembar-satu/audit?") != (slug == "kembar-satu") {
			t.Fatalf("%s's home: its bars do not lead to its own timeline: %.1500s", slug, home)
		}
	}
}
