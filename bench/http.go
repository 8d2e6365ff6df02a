package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
)

// The HTTP load family: the real binary (`web serve --demo` on a fresh
// database of the benchmark server) driven over loopback by N signed-in
// sessions at once, each with its own cookie jar, CSRF token and
// keep-alive connection, for -warmup then -duration. One line per mix and
// session count: throughput, latency percentiles, errors, and what one
// request costs in CPU (the web process, PostgreSQL's backends of its
// database) and in statements (or transactions) sent to PostgreSQL.
//
// The server and the signed-in sessions are made once per run and shared
// by every http benchmark of it (sign-ins hash a password each, a few
// hundred of them take a while); every round measures only its own window.

// httpSessionCounts are the concurrency levels measured.
var httpSessionCounts = []int{32, 256}

// httpMix is one workload: who the sessions sign in as (round-robin) and
// what each of them asks next.
type httpMix struct {
	name     string
	accounts []string
	next     func(ctx context.Context, base string, s *httpSession, rng *rand.Rand) (*http.Request, error)
}

var httpMixes = []httpMix{
	{name: "trail", accounts: []string{"budi@melati.test"}, next: getPage("/t/{slug}/audit")},
	{name: "home", accounts: []string{"budi@melati.test"}, next: getPage("/t/{slug}/")},
	{name: "staff_overview", accounts: []string{"support@jejak.test"}, next: getPage("/admin")},
	{name: "staff_jobs", accounts: []string{"support@jejak.test"}, next: getPage("/admin/jobs")},
	// Every session is the same owner of the same tenant: the tenant's
	// writers contend with each other.
	{name: "create_project", accounts: []string{"budi@melati.test"}, next: createProject},
	// 90 % reads (trail and home alike), 10 % project creations, by the
	// owners of three tenants.
	{name: "mix", accounts: []string{"budi@melati.test", "sari@senja.test", "dewi@batik.test"}, next: readWriteMix},
}

// mixNamed is the mix called name (the zero mix if none is).
func mixNamed(name string) httpMix {
	for _, m := range httpMixes {
		if m.name == name {
			return m
		}
	}
	return httpMix{}
}

func init() {
	for _, m := range httpMixes {
		for _, n := range httpSessionCounts {
			register(Bench{Name: "http", Labels: fmt.Sprintf("sessions=%d mix=%s", n, m.name), Run: httpBench(m, n)})
		}
	}
}

// getPage asks for path, with {slug} the session's tenant.
func getPage(path string) func(context.Context, string, *httpSession, *rand.Rand) (*http.Request, error) {
	return func(ctx context.Context, base string, s *httpSession, _ *rand.Rand) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, base+strings.ReplaceAll(path, "{slug}", s.slug), nil)
	}
}

// createProject posts the home page's project form, as a browser without
// htmx does (answered with a redirect, not followed).
func createProject(ctx context.Context, base string, s *httpSession, _ *rand.Rand) (*http.Request, error) {
	s.made++
	form := url.Values{"name": {fmt.Sprintf("bench %d-%d", s.id, s.made)}, "_csrf": {s.csrf}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/t/"+s.slug+"/projects", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

var (
	readTrail = getPage("/t/{slug}/audit")
	readHome  = getPage("/t/{slug}/")
)

func readWriteMix(ctx context.Context, base string, s *httpSession, rng *rand.Rand) (*http.Request, error) {
	switch r := rng.IntN(100); {
	case r < 10:
		return createProject(ctx, base, s, rng)
	case r < 55:
		return readTrail(ctx, base, s, rng)
	default:
		return readHome(ctx, base, s, rng)
	}
}

func httpBench(m httpMix, sessions int) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		srv, err := getHTTPServer(ctx, env)
		if err != nil {
			return Result{}, err
		}
		ss, err := srv.sessionsFor(ctx, m.accounts, sessions)
		if err != nil {
			return Result{}, fmt.Errorf("%w (server output ends: %s)", err, srv.web.out.tail(2000))
		}
		if err := srv.settle(ctx); err != nil {
			return Result{}, err
		}
		if env.Cfg.HTTPRate > 0 {
			fmt.Printf("# http sessions=%d mix=%s: paced at %g requests a second (-http-rate)\n", sessions, m.name, env.Cfg.HTTPRate)
		}
		load := loadAverage()
		run, err := srv.drive(ctx, ss, m.next, env.Cfg.Warmup, env.Cfg.Duration, env.Cfg.HTTPRate)
		if err != nil {
			return Result{}, err
		}
		if run.firstErr != "" {
			fmt.Printf("# http sessions=%d mix=%s: %d errors, the first: %s\n", sessions, m.name, run.errors, run.firstErr)
		}
		return run.result(srv.statements, load), nil
	}
}

// httpServer is the running binary, its database and the sessions signed
// in to it so far.
type httpServer struct {
	base string // http://127.0.0.1:port
	db   string
	web  *replica
	// admin is a superuser connection to the server's database for the
	// counters; its own backend is left out of PostgreSQL's CPU.
	admin *pgx.Conn
	// webOnly: the server runs no workers (-http-scale).
	webOnly bool
	// gzip: sessions ask for compressed answers (-http-gzip).
	gzip bool
	// statements: pg_stat_statements answers in this database, so
	// statements are counted; otherwise transactions are.
	statements bool

	mu       sync.Mutex
	sessions map[string][]*httpSession // by e-mail
	nextID   int
}

// httpSession is one signed-in browser: its own cookies, CSRF token and
// connection.
type httpSession struct {
	client *http.Client
	csrf   string
	slug   string // the account's tenant ("" for staff)
	id     int
	made   int // projects this session created, for unique names
}

var (
	httpOnce sync.Once
	httpSrv  *httpServer
	httpErr  error
)

func getHTTPServer(ctx context.Context, env *Env) (*httpServer, error) {
	httpOnce.Do(func() { httpSrv, httpErr = startHTTPServer(ctx, env) })
	return httpSrv, httpErr
}

var dashboardLine = regexp.MustCompile(`Jejak dashboard: (http://\S+?)/?\n`)

// startHTTPServer builds the binary, creates the database afresh and runs
// `web serve --demo` on it (seeding, workers and demo activity, as
// `make run` does) until the program ends.
func startHTTPServer(ctx context.Context, env *Env) (*httpServer, error) {
	bin, err := webBinary(ctx)
	if err != nil {
		return nil, err
	}
	s, args, err := httpDatabase(ctx, env)
	if err != nil {
		return nil, err
	}
	if s.gzip = env.Cfg.HTTPGzip; s.gzip {
		fmt.Println("# http: the sessions ask for gzip, as browsers do (-http-gzip)")
	}
	dir, err := os.MkdirTemp("", "jejak-bench-http-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"DATABASE_URL=" + env.DatabaseURL(s.db),
		"JEJAK_DATA_DIR=" + filepath.Join(dir, "data"),
		"JEJAK_ADDR=127.0.0.1:0",
		"JEJAK_LOG_LEVEL=warn",
	}
	if env.Cfg.HTTPScale {
		anchors := filepath.Join(dir, "anchors")
		if err := writeBenchAnchorDir(anchors); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("anchor directory: %w", err)
		}
		cmd.Env = append(cmd.Env, "JEJAK_WORKERS=0", "JEJAK_ANCHOR_DIR="+anchors)
	}
	if addr := os.Getenv("JEJAK_PPROF_ADDR"); addr != "" {
		// Profile the server while a line runs (docs/observability.md).
		cmd.Env = append(cmd.Env, "JEJAK_PPROF_ADDR="+addr)
	}
	s.web = &replica{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.web.out, s.web.out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start web serve: %w", err)
	}
	go func() {
		s.web.done <- cmd.Wait()
		os.RemoveAll(dir)
	}()
	atExit(func() {
		if err := s.web.stop(); err != nil {
			env.Log.Warn("stop web", "err", err)
		}
		if s.admin != nil {
			s.admin.Close(context.Background())
		}
		if env.Cfg.HTTPScale {
			return // the scale database is kept for the next run
		}
		if err := env.DropDatabase(context.Background(), s.db); err != nil {
			env.Log.Warn("drop database", "database", s.db, "err", err)
		}
	})
	started := time.Now()
	if s.base, err = s.waitListening(ctx); err != nil {
		return nil, err
	}
	if s.admin, err = pgx.Connect(ctx, env.DatabaseURL(s.db)); err != nil {
		return nil, err
	}
	if !env.Cfg.HTTPScale {
		n, err := seedJobMinutes(ctx, s.admin)
		if err != nil {
			return nil, err
		}
		// Folded into days as the maintenance leader would have long
		// since (the same code; it runs every pass from now on).
		if _, err := job.StatsFoldDays(ctx, s.admin, nil); err != nil {
			return nil, err
		}
		fmt.Printf("# http: %d rows of two days' per-minute job rollup added and folded\n", n)
	}
	s.statements = statementsAvailable(ctx, s.admin)
	counted := "transactions (pg_stat_statements is not loaded: xact_per_req from pg_stat_database)"
	if s.statements {
		counted = "statements (pg_stat_statements)"
	}
	fmt.Printf("# http: web %s pid %d on %s, database %s, up in %s; counting %s\n",
		strings.Join(args, " "), cmd.Process.Pid, s.base, s.db, time.Since(started).Round(time.Millisecond), counted)
	return s, nil
}

// seedJobMinutes gives every tenant the per-minute job rollup of a server
// that has run its jobs for two days: a row per minute, kind and stats
// shard of the connections that completed them (four of 16 here, three
// kinds), up to three minutes ago. The demo's database is minutes old,
// and the owner's home and the maintenance fold read this rollup: on a
// fresh database they would be measured on an empty one.
func seedJobMinutes(ctx context.Context, admin *pgx.Conn) (int64, error) {
	tag, err := admin.Exec(ctx, `INSERT INTO job_stats_minute (tenant_id, minute, kind, shard, succeeded, failed, dead)
		SELECT t.id, date_trunc('minute', now()) - make_interval(mins => m), k, s, 3, 1, 0
		  FROM tenants t, generate_series(3, 2879) m,
		       unnest(ARRAY['points.award', 'email.weekly-report', 'webhook.deliver']) k, generate_series(0, 3) s
		ON CONFLICT DO NOTHING`)
	if err != nil {
		return 0, fmt.Errorf("seed job minutes: %w", err)
	}
	return tag.RowsAffected(), nil
}

// httpDatabase is the server's database and the command line that serves
// it: a fresh database seeded by `serve --demo` (as `make run` does), or
// with -http-scale the scale database, seeded, migrated and sealed as the
// page benchmarks use it, served as it is (`serve`, without demo activity).
func httpDatabase(ctx context.Context, env *Env) (*httpServer, []string, error) {
	if env.Cfg.HTTPScale {
		sc, err := getScale(ctx, env)
		if err != nil {
			return nil, nil, err
		}
		return &httpServer{db: sc.name, webOnly: true, sessions: map[string][]*httpSession{}}, []string{"serve"}, nil
	}
	s := &httpServer{db: env.DBName("jejak_bench_http"), sessions: map[string][]*httpSession{}}
	if err := env.FreshMigrated(ctx, s.db); err != nil {
		return nil, nil, err
	}
	return s, []string{"serve", "--demo"}, nil
}

// waitListening waits for the line the server prints once it listens.
func (s *httpServer) waitListening(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // the demo seed comes first
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if m := dashboardLine.FindStringSubmatch(s.web.out.String()); m != nil {
			return m[1], nil
		}
		select {
		case err := <-s.web.done:
			s.web.done <- err
			return "", fmt.Errorf("web serve exited at start (%v): %s", err, s.web.out.String())
		case <-ctx.Done():
			return "", fmt.Errorf("web serve not listening: %w (output: %s)", ctx.Err(), s.web.out.String())
		case <-t.C:
		}
	}
}

// settle waits (up to two minutes) until the work earlier lines left
// behind is done: the sealer has caught up, the jobs due now and the
// outbox messages are handled (a created project fans out to webhook
// deliveries), down to what the demo's own activity keeps in flight. Left
// running, that backlog would be measured as the next line's CPU and
// latency. It then analyzes the database, as autovacuum would after the
// writes (this machine's server runs with autovacuum off).
func (s *httpServer) settle(ctx context.Context) error {
	if s.webOnly {
		// No workers, hence no sealer: nothing in the background to wait
		// for, and the scale database was analyzed when it was opened.
		return nil
	}
	const quiet = 20
	began := time.Now()
	deadline := began.Add(2 * time.Minute)
	var unsealed, jobs, outbox int64
	for {
		err := s.admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_unsealed),
			(SELECT count(*) FROM jobs WHERE state = 'running' OR (state = 'pending' AND available_at <= now())),
			(SELECT count(*) FROM outbox_messages WHERE state = 'pending' AND available_at <= now())`).Scan(&unsealed, &jobs, &outbox)
		if err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if unsealed <= quiet && jobs <= quiet && outbox <= quiet {
			break
		}
		if time.Now().After(deadline) {
			fmt.Printf("# http: not settled after %s (unsealed events %d, jobs due %d, outbox messages due %d): measuring anyway\n",
				time.Since(began).Round(time.Second), unsealed, jobs, outbox)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if d := time.Since(began); d > time.Second {
		fmt.Printf("# http: waited %s for the earlier lines' background work\n", d.Round(100*time.Millisecond))
	}
	if _, err := s.admin.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// statementsAvailable creates pg_stat_statements in the database if it can
// and reports whether it answers (only when the server preloads it).
func statementsAvailable(ctx context.Context, c querier) bool {
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return false
	}
	if _, err := c.Exec(ctx, "SELECT 1 FROM pg_stat_statements LIMIT 1"); err != nil {
		_, _ = c.Exec(ctx, "DROP EXTENSION IF EXISTS pg_stat_statements")
		return false
	}
	return true
}

// sessionsFor returns n sessions signed in as accounts round-robin,
// signing in the ones not made yet.
func (s *httpServer) sessionsFor(ctx context.Context, accounts []string, n int) ([]*httpSession, error) {
	type want struct {
		email string
		index int
	}
	var missing []want
	s.mu.Lock()
	for i := range n {
		w := want{accounts[i%len(accounts)], i / len(accounts)}
		if w.index >= len(s.sessions[w.email]) {
			missing = append(missing, w)
		}
	}
	s.mu.Unlock()
	// One account's sign-ins go one at a time: concurrent sign-ins of one
	// account from one address can deadlock in the throttle's refund and
	// then count as failures, until the account is throttled. Accounts
	// sign in side by side.
	byAccount := map[string]int{}
	for _, w := range missing {
		byAccount[w.email]++
	}
	errc := make(chan error, len(byAccount))
	var wg sync.WaitGroup
	for email, k := range byAccount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				sess, err := signInSession(ctx, s.base, email, s.gzip)
				if err != nil {
					errc <- err
					return
				}
				s.mu.Lock()
				sess.id = s.nextID
				s.nextID++
				s.sessions[email] = append(s.sessions[email], sess)
				s.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*httpSession, n)
	for i := range out {
		out[i] = s.sessions[accounts[i%len(accounts)]][i/len(accounts)]
	}
	return out, nil
}

// signInSession signs in through the real form (GET /login for the
// pre-session CSRF token, POST /login) and reads the session's own CSRF
// token from the page it lands on. With gzip its answers come compressed,
// as a browser asks for them (net/http decompresses them).
func signInSession(ctx context.Context, base, email string, gzip bool) (*httpSession, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{
		Jar:       jar,
		Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: !gzip},
		Timeout:   time.Minute,
		// Answers are measured as they come: a redirect is one request.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	sess := &httpSession{client: c, slug: accountTenant(email)}
	_, body, err := fetch(ctx, c, http.MethodGet, base+"/login", nil)
	if err != nil {
		return nil, err
	}
	tok, err := csrfToken(body)
	if err != nil {
		return nil, fmt.Errorf("/login: %w", err)
	}
	form := url.Values{"email": {email}, "password": {demo.Password}, "_csrf": {tok}}
	var res *http.Response
	for try := 0; ; try++ {
		res, _, err = fetch(ctx, c, http.MethodPost, base+"/login", form)
		if err != nil {
			return nil, err
		}
		if (res.StatusCode != http.StatusServiceUnavailable && res.StatusCode != http.StatusInternalServerError) || try == 60 {
			break
		}
		// 503: every hashing slot is taken; wait as told, like a person
		// would. 500: concurrent sign-ins of one account can fail (a
		// deadlock between their throttle refunds); a person retries.
		wait := 200 * time.Millisecond
		if s, _ := strconv.Atoi(res.Header.Get("Retry-After")); s > 0 {
			wait = time.Duration(s) * time.Second
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	if res.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign in as %s: status %d", email, res.StatusCode)
	}
	// The landing page (an owner's "/" sends on to the tenant's home).
	for hops := 0; res.StatusCode/100 == 3 && hops < 3; hops++ {
		if res, body, err = fetch(ctx, c, http.MethodGet, base+res.Header.Get("Location"), nil); err != nil {
			return nil, err
		}
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("after signing in as %s: %s answered %d", email, res.Request.URL.Path, res.StatusCode)
	}
	if sess.csrf, err = csrfToken(body); err != nil {
		return nil, fmt.Errorf("after signing in as %s: %w", email, err)
	}
	return sess, nil
}

// accountTenant is the slug of a demo account's tenant ("" for staff).
func accountTenant(email string) string {
	for _, a := range demo.Accounts {
		if a.Email == email {
			return a.Tenant
		}
	}
	return ""
}

func fetch(ctx context.Context, c *http.Client, method, u string, form url.Values) (*http.Response, []byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// csrfToken is the CSRF token of the first form on a page.
func csrfToken(page []byte) (string, error) {
	m := csrfField.FindSubmatch(page)
	if m == nil || len(m[1]) == 0 {
		return "", errors.New("no CSRF token on the page")
	}
	return string(m[1]), nil
}

// httpRun is what one measured window saw.
type httpRun struct {
	window   time.Duration
	lat      []float64 // ms of every request answered in the window, sorted
	ok       int
	errors   int
	firstErr string
	before   counters
	after    counters
	// behind is how many events published to the stream the webhook
	// fan-out had not yet handled when the window ended; undelivered how
	// many webhook deliveries were still to be made then, held how many
	// more waited for a failing endpoint's breaker (each demo tenant has
	// an endpoint that always fails).
	behind, undelivered, held int64
}

func (r httpRun) result(statements bool, load float64) Result {
	done := float64(r.ok + r.errors)
	per := func(v float64) float64 {
		if done == 0 {
			return 0
		}
		return v / done
	}
	d := r.after.sub(r.before)
	return Result{Metrics: []Metric{
		{"req_per_sec", float64(r.ok) / r.window.Seconds()},
		{"p50_ms", percentile(r.lat, 50)}, {"p95_ms", percentile(r.lat, 95)}, {"p99_ms", percentile(r.lat, 99)},
		{"errors", float64(r.errors)},
		{"web_cpu_per_req_ms", per(d.webCPU.Seconds() * 1000)},
		{"pg_cpu_per_req_ms", per(d.pgCPU.Seconds() * 1000)},
		{statementsMetric(statements, "req"), per(float64(d.statements))},
		{"requests", done},
		{"fanout_behind", float64(r.behind)},
		{"webhooks_pending", float64(r.undelivered)},
		{"webhooks_held", float64(r.held)},
		{"loadavg_1m", load},
	}}
}

// drive runs every session's loop for warmup+window and keeps the
// requests that started and were answered inside the window; the
// counters are read at its two ends.
//
// With rate > 0 the sessions together start at most rate requests a
// second (pace): a load that stays below what the server can take, so
// what it leaves behind (webhook deliveries) shows whether the work
// behind the requests keeps up at that rate.
func (s *httpServer) drive(ctx context.Context, ss []*httpSession, next func(context.Context, string, *httpSession, *rand.Rand) (*http.Request, error), warmup, window time.Duration, rate float64) (httpRun, error) {
	run := httpRun{window: window}
	from := time.Now().Add(warmup)
	to := from.Add(window)
	loadCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	var tokens <-chan struct{}
	if rate > 0 {
		tokens = pace(loadCtx, rate)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, sess := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(from.UnixNano())))
			lat, ok, bad, first := sessionLoop(loadCtx, s.base, sess, next, rng, from, to, tokens)
			mu.Lock()
			run.lat = append(run.lat, lat...)
			run.ok += ok
			run.errors += bad
			if run.firstErr == "" {
				run.firstErr = first
			}
			mu.Unlock()
		}()
	}
	var err error
	select {
	case <-loadCtx.Done():
	case <-time.After(time.Until(from)):
		run.before, err = s.counters(ctx)
		<-loadCtx.Done()
		if err == nil {
			run.after, err = s.counters(ctx)
		}
		if err == nil {
			run.behind, run.undelivered, run.held, err = s.webhookBacklog(ctx)
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return run, ctx.Err()
	}
	sort.Float64s(run.lat)
	return run, err
}

// webhookBacklog counts the work on webhooks the request path has left:
// the events the relay has published that the fan-out has not turned into
// deliveries yet, among tenants with an endpoint taking every event (each
// demo tenant has one; the event of a delivery is its outbox id), and the
// deliveries not yet made: pending (due or delayed), and held by a breaker.
func (s *httpServer) webhookBacklog(ctx context.Context) (behind, undelivered, held int64, err error) {
	err = s.admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM outbox_messages o
		  WHERE o.state = 'delivered'
		    AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = o.tenant_id
		                   AND e.enabled AND e.deleted_at IS NULL AND '*' = ANY(e.events))
		    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.tenant_id = o.tenant_id AND d.event_id = o.id)),
		(SELECT count(*) FILTER (WHERE held_at IS NULL) FROM webhook_deliveries WHERE state = 'pending'),
		(SELECT count(*) FILTER (WHERE held_at IS NOT NULL) FROM webhook_deliveries WHERE state = 'pending')`).Scan(&behind, &undelivered, &held)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count the webhook backlog: %w", err)
	}
	return behind, undelivered, held, nil
}

// sessionLoop is one session asking for one request after the other
// until ctx ends, timing the ones inside [from, to]; with tokens, each
// request waits for one first. A GET must answer 2xx (a redirect means
// the session was lost and the page not served), a POST 2xx or 3xx;
// anything else, or no answer, is an error.
func sessionLoop(ctx context.Context, base string, s *httpSession, next func(context.Context, string, *httpSession, *rand.Rand) (*http.Request, error), rng *rand.Rand, from, to time.Time, tokens <-chan struct{}) (lat []float64, ok, bad int, first string) {
	for ctx.Err() == nil {
		if tokens != nil {
			select {
			case <-tokens:
			case <-ctx.Done():
				return lat, ok, bad, first
			}
		}
		req, err := next(ctx, base, s, rng)
		if err != nil {
			return lat, ok, bad + 1, err.Error()
		}
		t0 := time.Now()
		res, err := s.client.Do(req)
		status := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			status = res.StatusCode
		}
		t1 := time.Now()
		if t0.Before(from) || t1.After(to) || (err != nil && ctx.Err() != nil) {
			continue // warm-up, or cut off by the end of the window
		}
		lat = append(lat, float64(t1.Sub(t0).Microseconds())/1000)
		if good(req.Method, status) {
			ok++
			continue
		}
		bad++
		if first == "" {
			first = fmt.Sprintf("%s %s: status %d %v", req.Method, req.URL.Path, status, err)
		}
	}
	return lat, ok, bad, first
}

// pace hands out rate tokens a second until ctx ends, the i-th no sooner
// than i/rate seconds from its start: a token no session was free to take
// on time goes to the next one free, so the sessions catch up with the
// schedule when they can and never run ahead of it.
func pace(ctx context.Context, rate float64) <-chan struct{} {
	tokens := make(chan struct{})
	go func() {
		start := time.Now()
		t := time.NewTimer(0)
		defer t.Stop()
		for i := 0; ; i++ {
			t.Reset(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return tokens
}

func good(method string, status int) bool {
	if method == http.MethodGet {
		return status >= 200 && status < 300
	}
	return status >= 200 && status < 400
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
