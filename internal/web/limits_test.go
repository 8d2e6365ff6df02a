package web_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/web"
)

// A body over the form limit is refused with 413 before sessions and CSRF,
// whether the client announces its length or streams it.
func TestBodyLimitAnswers413(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	form := c.withCSRF(url.Values{"email": {"budi@melati.test"}, "password": {strings.Repeat("x", 100<<10)}})
	if a := c.post("/login", form, false); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("100 KiB sign-in form: %d, want 413", a.status)
	}
	// Streamed (no Content-Length): the limit is enforced while reading.
	body := io.MultiReader(strings.NewReader(form.Encode()), strings.NewReader(strings.Repeat("y", 1<<20)))
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/login", io.NopCloser(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if a := c.do(req); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("streamed 1 MiB: %d, want 413", a.status)
	}
	// A large multipart upload is refused the same way and never spills
	// to disk: nothing past the limit is read.
	mp := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big\"\r\n\r\n" + strings.Repeat("z", 200<<10) + "\r\n--B--\r\n"
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/login", strings.NewReader(mp))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
	if a := c.do(req); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("multipart 200 KiB: %d, want 413", a.status)
	}
	// A normal sign-in still works.
	c.login("budi@melati.test")
}

// Cookieless visitors cost no session row; signing in writes one.
func TestAnonymousGETsWriteNoSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := 0; i < 5; i++ {
		for _, p := range []string{"/login", "/", "/t/toko-bunga-melati/"} {
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+p, nil)
			res, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
	}
	if n := f.count(`SELECT count(*) FROM sessions`); n != 0 {
		t.Fatalf("anonymous GETs wrote %d session rows", n)
	}
	c := f.client()
	c.get("/login")
	c.get("/login")
	if n := f.count(`SELECT count(*) FROM sessions`); n != 0 {
		t.Fatalf("a browser viewing the sign-in page wrote %d session rows", n)
	}
	c.login("budi@melati.test")
	if n := f.count(`SELECT count(*) FROM sessions`); n != 1 {
		t.Fatalf("sign-in wrote %d session rows, want 1", n)
	}
}

// The pre-sign-in token only works with the cookie of the browser it was
// made for, and every replica (another handler on the same database)
// accepts it.
func TestPreSignInCSRFBoundToBrowserAndSharedByReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.client(), f.client()
	tokenA := a.csrf()
	if tokenB := b.csrf(); tokenA == tokenB {
		t.Fatal("two browsers got the same token")
	}
	creds := url.Values{"email": {"budi@melati.test"}, "password": {"jejak-demo"}, "_csrf": {tokenA}}
	if got := b.post("/login", creds, false); got.status != http.StatusForbidden {
		t.Fatalf("token of browser A with browser B's cookie: %d, want 403", got.status)
	}
	// A second replica over the same database.
	replica := httptest.NewServer(newHandler(f.db, f.jobs, quietLog(), 0))
	defer replica.Close()
	req, _ := http.NewRequest(http.MethodPost, replica.URL+"/login", strings.NewReader(creds.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range a.http.Jar.Cookies(mustURL(f.srv.URL)) {
		req.AddCookie(ck)
	}
	if got := a.do(req); got.status != http.StatusSeeOther {
		t.Fatalf("browser A's token at another replica: %d, want 303", got.status)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// A CSRF token in the query string is not accepted.
func TestCSRFTokenNotFromQueryString(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	token := c.csrf()
	before := f.count(`SELECT count(*) FROM projects`)
	a := c.post("/t/toko-bunga-melati/projects?_csrf="+url.QueryEscape(token), url.Values{"name": {"Lewat URL"}}, false)
	if a.status != http.StatusForbidden {
		t.Fatalf("token in the query string: %d, want 403", a.status)
	}
	if n := f.count(`SELECT count(*) FROM projects`); n != before {
		t.Fatal("a project was created with the token in the URL")
	}
	// The header works (htmx sends it so).
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/t/toko-bunga-melati/projects", strings.NewReader("name=Lewat+Header"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", token)
	if a := c.do(req); a.status != http.StatusSeeOther {
		t.Fatalf("token in the header: %d", a.status)
	}
}

func TestSecurityHeadersAndStatic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	if a := c.get("/login"); a.header.Get("Strict-Transport-Security") != "" {
		t.Fatal("HSTS without TLS or secure cookies")
	}
	c.login("budi@melati.test")
	home := c.get("/t/toko-bunga-melati/")
	if home.status != http.StatusOK || home.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("signed-in page: %d Cache-Control=%q, want no-store", home.status, home.header.Get("Cache-Control"))
	}
	if a := c.get("/static/"); a.status != http.StatusNotFound || strings.Contains(a.body, "app.css") {
		t.Fatalf("GET /static/: %d, want 404 without a listing: %.200s", a.status, a.body)
	}
	if a := c.get("/static/app.css"); a.status != http.StatusOK {
		t.Fatalf("GET /static/app.css: %d", a.status)
	}

	secure, _, _ := newFixtureWith(t, func(d *web.Deps) { d.SecureCookies = true })
	a := secure.client().get("/login")
	if hsts := a.header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
		t.Fatalf("HSTS with secure cookies: %q", hsts)
	}
}

// TestBadTextRefusedOnEveryRoute sends a NUL byte and invalid UTF-8 in a
// query parameter, a form field and a path parameter to every registered
// route, as anonymous, tenant owner and staff: each answers 400 and logs no
// error.
func TestBadTextRefusedOnEveryRoute(t *testing.T) {
	t.Parallel()
	f, deps, logs := newFixtureWith(t, nil)
	e := web.New(*deps)
	param := regexp.MustCompile(`:[a-z_]+|\*`)
	bad := []string{"%00", "%ff", "a%00b", "%c3%28"}
	seen := map[string]bool{}
	for _, role := range []string{"anonymous", "budi@melati.test", "support@jejak.test"} {
		c := f.client()
		if role != "anonymous" {
			c.login(role)
		}
		token := c.csrf()
		for _, r := range e.Routes() {
			key := r.Method + " " + r.Path
			if r.Method == echo.RouteNotFound || seen[role+key] {
				continue
			}
			seen[role+key] = true
			// A valid concrete path: the tenant's slug, an id.
			good := strings.ReplaceAll(r.Path, ":slug", "toko-bunga-melati")
			good = param.ReplaceAllString(good, "1")
			for _, b := range bad {
				var tries []*http.Request
				for _, field := range []string{"kind", "key", "trace", "name", "reason", "before", "q"} {
					u := f.srv.URL + good + "?" + field + "=" + b
					req, _ := http.NewRequest(r.Method, u, nil)
					tries = append(tries, req)
				}
				if strings.Contains(r.Path, ":") {
					req, _ := http.NewRequest(r.Method, f.srv.URL+param.ReplaceAllString(strings.ReplaceAll(r.Path, ":slug", b), b), nil)
					tries = append(tries, req)
				}
				if r.Method == http.MethodPost {
					body := "_csrf=" + url.QueryEscape(token) + "&name=" + b + "&reason=" + b + "&action=retry&email=" + b + "&password=x"
					req, _ := http.NewRequest(r.Method, f.srv.URL+good, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					tries = append(tries, req)
				}
				for _, req := range tries {
					a := c.do(req)
					if a.status != http.StatusBadRequest {
						t.Errorf("%s %s as %s: %d, want 400", req.Method, req.URL.RequestURI(), role, a.status)
					}
				}
			}
		}
	}
	if errs := logs.errors(); len(errs) > 0 {
		t.Fatalf("bad input logged %d errors, first: %s", len(errs), errs[0])
	}
	if n := f.count(`SELECT count(*) FROM projects WHERE name LIKE 'a%'`); n != 0 {
		t.Fatalf("%d projects created from bad text", n)
	}
}

// A client that sends its headers and then stalls the body is cut off at
// the read timeout instead of holding a connection forever.
func TestServerReadTimeout(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	srv := web.NewHTTPServer(h, web.Timeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond,
		Write: time.Second, Idle: time.Second})
	if srv.WriteTimeout == 0 || srv.IdleTimeout == 0 || web.DefaultTimeouts.Read == 0 || web.DefaultTimeouts.Write == 0 || web.DefaultTimeouts.Idle == 0 {
		t.Fatal("timeouts not set")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nemail=")
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(bufio.NewReader(conn))
	if err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stalled body held the connection %s", d)
	}
}

// Twenty parallel verifications by a read-only member are all refused
// before any work; the owner's succeed.
func TestVerifyIsForOwnersAndAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	member, owner := f.client(), f.client()
	member.login("rina@melati.test")
	owner.login("budi@melati.test")
	mForm, oForm := member.withCSRF(nil), owner.withCSRF(nil)
	type result struct{ who, status int }
	out := make(chan result, 40)
	for i := 0; i < 20; i++ {
		go func() { out <- result{0, member.post("/t/toko-bunga-melati/audit/verify", mForm, true).status} }()
		go func() { out <- result{1, owner.post("/t/toko-bunga-melati/audit/verify", oForm, true).status} }()
	}
	for i := 0; i < 40; i++ {
		r := <-out
		if r.who == 0 && r.status != http.StatusForbidden {
			t.Fatalf("member verify: %d, want 403", r.status)
		}
		if r.who == 1 && r.status != http.StatusOK {
			t.Fatalf("owner verify: %d, want 200", r.status)
		}
	}
	if page := member.get("/t/toko-bunga-melati/audit"); strings.Contains(page.body, `data-testid="verify-now"`) {
		t.Fatal("a member is offered Verify now")
	}
}
