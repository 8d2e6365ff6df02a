package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// fixture is a running dashboard over its own seeded database.
type fixture struct {
	t    *testing.T
	db   *testdb.DB
	srv  *httptest.Server
	jobs *job.Engine // enqueue-only engine (no workers) shared with the handler
	// sched is the /admin scheduler, set by newSensitiveFixture.
	sched *schedule.Scheduler
}

func newFixture(t *testing.T) *fixture { return newAdminFixture(t, 0) }

// newAdminFixture is newFixture with the overview snapshot's max age set
// (0 = the default; negative = fresh on every request). Its engine's
// retries are due at once, so tests can run a job through several attempts
// by hand.
func newAdminFixture(t *testing.T, statsMaxAge time.Duration) *fixture {
	t.Helper()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatalf("seed demo data: %v", err)
	}
	log := quietLog()
	engine, err := job.New(job.Config{Pool: db.System, Logger: log, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatalf("job engine: %v", err)
	}
	srv := httptest.NewServer(newHandler(db, engine, log, statsMaxAge))
	t.Cleanup(srv.Close)
	return &fixture{t: t, db: db, srv: srv, jobs: engine}
}

// newHandler is the application's handler (app.NewDeps) over db.
func newHandler(db *testdb.DB, engine *job.Engine, log *slog.Logger, statsMaxAge time.Duration) http.Handler {
	deps := app.NewDeps(db.App, db.System, engine, clock.Database{}, log)
	deps.StatsMaxAge = statsMaxAge
	deps.Audit.UseVerifierKey(logSigner().VerifierKey())
	return web.New(deps)
}

// logSigner is the checkpoint key of every test server: generated once per
// run, like the anchor key a server makes on its first start.
var logSigner = sync.OnceValue(func() *audit.LogSigner {
	s, err := audit.GenerateLogSigner()
	if err != nil {
		panic(err)
	}
	return s
})

// seal runs the server's sealer once over everything waiting: the events
// get their seqs and every grown tree a signed checkpoint.
func (f *fixture) seal() {
	f.t.Helper()
	if err := audit.NewSealer(f.db.System, audit.SealerOptions{Signer: logSigner()}).Drain(context.Background()); err != nil {
		f.t.Fatalf("seal the audit log: %v", err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// count runs a superuser COUNT query, for asserting what changed.
func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.db.Admin.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// tenantID returns the id of the tenant with slug.
func (f *fixture) tenantID(slug string) int64 {
	f.t.Helper()
	var id int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id FROM tenants WHERE slug = $1`, slug).Scan(&id); err != nil {
		f.t.Fatalf("tenant %s: %v", slug, err)
	}
	return id
}

// userID returns the id of the user with that e-mail.
func (f *fixture) userID(email string) int64 {
	f.t.Helper()
	var id int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id FROM users WHERE email = $1`, email).Scan(&id); err != nil {
		f.t.Fatalf("user %s: %v", email, err)
	}
	return id
}

func (f *fixture) projectID(slug, name string) int64 {
	f.t.Helper()
	var id int64
	err := f.db.Admin.QueryRow(context.Background(), `SELECT p.id FROM projects p JOIN tenants t ON t.id = p.tenant_id
		WHERE t.slug = $1 AND p.name = $2`, slug, name).Scan(&id)
	if err != nil {
		f.t.Fatalf("project %s/%s: %v", slug, name, err)
	}
	return id
}

// client is a browser-like HTTP client with a cookie jar that does not
// follow redirects, so tests see each answer.
type client struct {
	f    *fixture
	http *http.Client
}

// plainTransport asks for answers uncompressed. Under the race detector,
// sync.Pool drops a quarter of what is put back, so the server's gzip
// middleware allocated a new compressor for every fourth answer, and the
// detector's bookkeeping of those large allocations was most of the CPU
// of a test sending thousands of requests. Compression has its own tests
// (chrome_test.go), which ask for it explicitly.
var plainTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return t
}()

func (f *fixture) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{f: f, http: &http.Client{Jar: jar, Transport: plainTransport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type answer struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (c *client) do(req *http.Request) answer {
	c.f.t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		c.f.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: string(b), location: res.Header.Get("Location"), header: res.Header}
}

func (c *client) get(path string) answer {
	req, _ := http.NewRequest(http.MethodGet, c.f.srv.URL+path, nil)
	return c.do(req)
}

// post sends a form. htmx adds the HX-Request header as htmx would.
func (c *client) post(path string, form url.Values, htmx bool) answer {
	req, _ := http.NewRequest(http.MethodPost, c.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if htmx {
		req.Header.Set("HX-Request", "true")
	}
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// csrf returns the session's CSRF token as a page renders it.
func (c *client) csrf() string {
	c.f.t.Helper()
	a := c.get("/login")
	// A signed-in user is sent on from /login; any page they land on
	// carries the token (the sign-out form).
	for i := 0; i < 3 && a.location != ""; i++ {
		a = c.get(a.location)
	}
	m := csrfField.FindStringSubmatch(a.body)
	if m == nil {
		c.f.t.Fatalf("no CSRF field found: %d %s", a.status, a.body)
	}
	return m[1]
}

// withCSRF returns form plus the session's token.
func (c *client) withCSRF(form url.Values) url.Values {
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", c.csrf())
	return form
}

func (c *client) login(email string) answer {
	c.f.t.Helper()
	a := c.post("/login", c.withCSRF(url.Values{"email": {email}, "password": {demo.Password}}), false)
	if a.status != http.StatusSeeOther {
		c.f.t.Fatalf("sign in as %s: status %d: %s", email, a.status, a.body)
	}
	return a
}
