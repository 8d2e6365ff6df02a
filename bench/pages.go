package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/web"
)

// Large-data benchmarks: the audit timeline and the
// dashboard's pages on a database of millions of audit events and jobs.
// Seeding takes minutes, so the scale database (jejak_scale) is kept
// between runs and reused while it holds at least the asked-for sizes
// (Config.ScaleAuditEvents, ScaleJobs); -reseed rebuilds it. The real HTTP
// handler (app.NewDeps + web.New) serves the pages in-process on loopback;
// requests are sequential, so each figure is one request's latency. Every
// page runs twice: load=none with the database otherwise idle, and
// load=engine while a worker pool and a producer keep the engine busy on the
// same database (load.go), which is what an operator looking at the
// dashboard sees.

const scaleDBName = "jejak_scale"

func init() {
	register(Bench{Name: "audit_timeline first", Run: timelineBench(false)})
	register(Bench{Name: "audit_timeline next", Run: timelineBench(true)})
	register(Bench{Name: "audit_timeline search", Run: timelineSearchBench})
	// Every page twice in a row, quiet and under engine load, so a change
	// in the machine hits both variants alike.
	for _, p := range pages {
		register(Bench{Name: p.name, Labels: "load=none", Run: pageBench(p, false)})
		register(Bench{Name: p.name, Labels: "load=engine", Run: pageBench(p, true)})
	}
}

// page is one dashboard page benchmark: GET path as user as.
type page struct {
	name, path, as string
	// fresh uses the server whose overview snapshot is rebuilt on every
	// request (what one poll costs when the snapshot is stale).
	fresh bool
}

// pages are the tenant timeline (Melati, the largest trail) and the tenant
// jobs tabs of a small tenant (Batik Nusantara: one tenant's share of the
// jobs, so a tab that walks all jobs for a few rows shows), and every staff
// page. In a path, {older} is a cursor at a random depth of Melati's trail
// and {trace} the trace id of a seeded job picked at random.
var pages = []page{
	{name: "page /t/{slug}/audit", path: "/t/toko-bunga-melati/audit", as: "budi@melati.test"},
	{name: "page /t/{slug}/audit?before", path: "/t/toko-bunga-melati/audit?before={older}", as: "budi@melati.test"},
	// The trail's first day: every newer event lies between it and the top.
	{name: "page /t/{slug}/audit?from", path: "/t/toko-bunga-melati/audit?from=2026-01-01&to=2026-01-01", as: "budi@melati.test"},
	{name: "page /t/{slug}/audit?actor", path: "/t/toko-bunga-melati/audit?actor=staff", as: "budi@melati.test"},
	// A quick filter (a set of actions) and a name search (the trigram
	// index) as an owner uses them.
	{name: "page /t/{slug}/audit?quick", path: "/t/toko-bunga-melati/audit?quick=deletions", as: "budi@melati.test"},
	{name: "page /t/{slug}/audit?q", path: "/t/toko-bunga-melati/audit?q=katalog+musim", as: "budi@melati.test"},
	// A rare name: one project's events, about one in 18,000 of the trail,
	// most of them below any window of newest events.
	{name: "page /t/{slug}/audit?q=rare", path: "/t/toko-bunga-melati/audit?q=" + url.QueryEscape(audit.ScaleProjectName(4242)), as: "budi@melati.test"},
	{name: "page /t/{slug}/jobs", path: "/t/batik-nusantara/jobs", as: "dewi@batik.test"},
	{name: "page /t/{slug}/jobs?state=succeeded", path: "/t/batik-nusantara/jobs?state=succeeded", as: "dewi@batik.test"},
	{name: "page /t/{slug}/jobs?state=cancelled", path: "/t/batik-nusantara/jobs?state=cancelled", as: "dewi@batik.test"},
	{name: "page /admin", path: "/admin", as: "support@jejak.test"},
	{name: "page /admin?fresh", path: "/admin", as: "support@jejak.test", fresh: true},
	{name: "page /admin/jobs", path: "/admin/jobs", as: "support@jejak.test"},
	{name: "page /admin/dead", path: "/admin/dead", as: "support@jejak.test"},
	{name: "page /admin/search?trace", path: "/admin/search?trace={trace}", as: "support@jejak.test"},
}

// scaleEnv is the seeded database and a running dashboard over it, shared
// by every large-data benchmark of one run.
type scaleEnv struct {
	name, url   string
	tenants     []int64  // every tenant, for the engine load
	traces      []string // seeded jobs' trace ids
	app, system *pgxpool.Pool
	melati      int64
	events      int64 // melati's audit events
	// firstID and lastID bound melati's event ids: the trail's cursor.
	firstID, lastID int64
	srv, freshSv    *httptest.Server
	clients         map[string]*http.Client
}

// olderCursor is a random "older" cursor into melati's trail: an event
// id past its newest 50 events' worth of ids.
func (s *scaleEnv) olderCursor(rng *rand.Rand) int64 {
	return s.firstID + 50 + rng.Int64N(max(s.lastID-s.firstID-50, 1))
}

var (
	scaleOnce sync.Once
	scale     *scaleEnv
	scaleErr  error
)

func getScale(ctx context.Context, env *Env) (*scaleEnv, error) {
	scaleOnce.Do(func() { scale, scaleErr = openScale(ctx, env) })
	return scale, scaleErr
}

func openScale(ctx context.Context, env *Env) (*scaleEnv, error) {
	base := env.Cfg.ScaleDB
	if base == "" {
		base = scaleDBName
	}
	name := env.DBName(base)
	s := &scaleEnv{name: name, url: env.DatabaseURL(name), clients: map[string]*http.Client{}}
	if env.Cfg.Reseed || !scaleIsReady(ctx, env, name) {
		if env.Cfg.ScaleNoMigrate {
			// Read-only use never rebuilds someone else's database.
			return nil, fmt.Errorf("scale database %s is missing or smaller than asked (-scale-no-migrate does not seed)", name)
		}
		if err := seedScale(ctx, env, name, s.url); err != nil {
			return nil, err
		}
	} else {
		fmt.Printf("# scale database %s reused (use -reseed to rebuild)\n", name)
		if !env.Cfg.ScaleNoMigrate {
			if err := database.Migrate(ctx, s.url); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if s.app, err = timedPool(ctx, database.Open, s.url); err != nil {
		return nil, err
	}
	if s.system, err = timedPool(ctx, database.OpenSystem, s.url); err != nil {
		return nil, err
	}
	if !env.Cfg.ScaleNoMigrate {
		// Pages, proofs and verification are measured on a sealed log, as a
		// running server keeps it.
		if err := sealScale(ctx, s.system); err != nil {
			return nil, err
		}
		// Statistics as autovacuum keeps them in production: a server run
		// with autovacuum off (this machine's is) would otherwise plan the
		// pages over tables it never analyzed (the trace index, filled by
		// triggers, was still "empty" at a million rows).
		if err := analyze(ctx, env, name); err != nil {
			return nil, err
		}
		// And the sealer's queue vacuumed as autovacuum would: sealing 10M
		// events leaves 10M dead index entries that the next search of the
		// queue walks (10,267 buffers for 2 live rows, seen on this machine).
		// The search's word postings too, which autovacuum visits for
		// their inserts: until then the count of a word's postings reads
		// the table beside the index (2,000 heap pages per probe). And the
		// search texts, whose nameless rows a migration deleted.
		if err := vacuum(ctx, env, name, "audit_unsealed", "audit_words", "audit_search"); err != nil {
			return nil, err
		}
	}
	if err := s.system.QueryRow(ctx, `SELECT t.id, count(e.id), coalesce(min(e.id), 0), coalesce(max(e.id), 0)
		FROM tenants t LEFT JOIN audit_events e ON e.tenant_id = t.id
		WHERE t.slug = 'toko-bunga-melati' GROUP BY t.id`).Scan(&s.melati, &s.events, &s.firstID, &s.lastID); err != nil {
		return nil, fmt.Errorf("find melati's trail: %w", err)
	}
	rows, err := s.system.Query(ctx, `SELECT id FROM tenants ORDER BY id`)
	if err != nil {
		return nil, err
	}
	if s.tenants, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	// Trace ids of jobs spread over the table, so the trace page is not
	// timed on one cached trace. The oldest job comes through jobs_id_idx
	// (the primary key leads with tenant_id).
	rows, err = s.system.Query(ctx, `(SELECT trace_id FROM jobs TABLESAMPLE BERNOULLI (1) LIMIT 100)
		UNION ALL (SELECT trace_id FROM jobs WHERE state <> 'running' ORDER BY id LIMIT 1)`)
	if err != nil {
		return nil, err
	}
	if s.traces, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(s.traces) == 0 {
		return nil, fmt.Errorf("find trace ids (%d): %w", len(s.traces), err)
	}
	var counts [2]int64
	if err := s.system.QueryRow(ctx, `SELECT (SELECT reltuples::bigint FROM pg_class WHERE relname = 'audit_sealed'),
		(SELECT reltuples::bigint FROM pg_class WHERE relname = 'jobs')`).Scan(&counts[0], &counts[1]); err != nil {
		return nil, err
	}
	fmt.Printf("# scale database: ~%d audit events (melati: %d), ~%d jobs\n", counts[0], s.events, counts[1])

	// No workers: the job mix must stay as seeded while pages are timed.
	engine, err := job.New(job.Config{Pool: s.system, Logger: env.Log})
	if err != nil {
		return nil, err
	}
	deps := app.NewDeps(s.app, s.system, engine, clock.Database{}, env.Log)
	s.srv = httptest.NewServer(web.New(deps))
	deps.StatsMaxAge = -1 // every request refreshes the overview snapshot
	s.freshSv = httptest.NewServer(web.New(deps))
	for _, who := range []string{"budi@melati.test", "dewi@batik.test", "support@jejak.test"} {
		for _, srv := range []*httptest.Server{s.srv, s.freshSv} {
			c, err := signedInClient(ctx, srv.URL, who)
			if err != nil {
				return nil, err
			}
			s.clients[srv.URL+" "+who] = c
		}
	}
	return s, nil
}

// inQueries adds up the time the dashboard's pools spend in statements
// (from sending one to reading its last row, BEGIN and COMMIT included),
// so a page's figure splits into time in PostgreSQL round trips and time
// in Go. Requests are sequential and the engine load has pools of its own,
// so between two reads it is one request's.
var inQueries queryClock

type queryClock struct {
	ns, n atomic.Int64
}

type queryStart struct{}

func (q *queryClock) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, queryStart{}, time.Now())
}

func (q *queryClock) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if t0, ok := ctx.Value(queryStart{}).(time.Time); ok {
		q.ns.Add(int64(time.Since(t0)))
		q.n.Add(1)
	}
}

// take returns the time and count since the last take and starts over.
func (q *queryClock) take() (time.Duration, int64) {
	return time.Duration(q.ns.Swap(0)), q.n.Swap(0)
}

// timedPool opens a pool the way the server does (open: database.Open or
// OpenSystem, so with the same role, settings and limits) and reopens it
// with the same configuration plus the inQueries tracer.
func timedPool(ctx context.Context, open func(context.Context, string, int32) (*pgxpool.Pool, error), url string) (*pgxpool.Pool, error) {
	p, err := open(ctx, url, 8)
	if err != nil {
		return nil, err
	}
	cfg := p.Config()
	p.Close()
	cfg.ConnConfig.Tracer = &inQueries
	return pgxpool.NewWithConfig(ctx, cfg)
}

// scaleIsReady reports whether jejak_scale exists with the asked-for sizes.
func scaleIsReady(ctx context.Context, env *Env, name string) bool {
	c, err := pgx.Connect(ctx, env.DatabaseURL(name))
	if err != nil {
		return false
	}
	defer c.Close(ctx)
	var events, jobs float64
	err = c.QueryRow(ctx, `SELECT (SELECT reltuples FROM pg_class WHERE relname = 'audit_sealed'),
		(SELECT reltuples FROM pg_class WHERE relname = 'jobs')`).Scan(&events, &jobs)
	return err == nil && events >= 0.97*float64(env.Cfg.ScaleAuditEvents) && jobs >= 0.97*float64(env.Cfg.ScaleJobs)
}

func seedScale(ctx context.Context, env *Env, name, url string) error {
	start := time.Now()
	fmt.Printf("# seeding %s: %d audit events, %d jobs (one-time; minutes for 10M events)\n", name, env.Cfg.ScaleAuditEvents, env.Cfg.ScaleJobs)
	if err := env.FreshMigrated(ctx, name); err != nil {
		return err
	}
	system, err := database.OpenSystem(ctx, url, 4)
	if err != nil {
		return err
	}
	defer system.Close()
	if err := demo.Seed(ctx, system); err != nil {
		return err
	}
	err = demo.SeedScale(ctx, system, url, demo.ScaleOptions{Tenants: 20, AuditEvents: env.Cfg.ScaleAuditEvents, Jobs: env.Cfg.ScaleJobs, Out: prefixWriter{"# "}})
	if err != nil {
		return err
	}
	fmt.Printf("# seeded in %s\n", time.Since(start).Round(time.Second))
	return nil
}

type prefixWriter struct{ prefix string }

func (p prefixWriter) Write(b []byte) (int, error) {
	fmt.Print(p.prefix + string(b))
	return len(b), nil
}

// timelineBench times audit.Timeline itself (no HTTP): the first page, or
// an older page from a cursor at a random depth of Melati's trail.
func timelineBench(older bool) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		s, err := getScale(ctx, env)
		if err != nil {
			return Result{}, err
		}
		rng := rand.New(rand.NewPCG(1, 2))
		return timeIt(env.Cfg.Requests, func() error {
			var before int64
			if older {
				before = s.olderCursor(rng)
			}
			return database.InTenantTx(ctx, s.app, s.melati, func(tx pgx.Tx) error {
				_, err := audit.Timeline(ctx, tx, s.melati, audit.Filter{}, before, 50)
				return err
			})
		})
	}
}

// timelineSearchBench times a name search of melati's trail: each request
// one project's full name at random ("Katalog Musim 4242"), as generated
// data names its projects, so the index is probed for a rare name.
func timelineSearchBench(ctx context.Context, env *Env, _ string) (Result, error) {
	s, err := getScale(ctx, env)
	if err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewPCG(5, 6))
	return timeIt(env.Cfg.Requests, func() error {
		term, err := audit.CheckSearch(audit.ScaleProjectName(1 + rng.IntN(5000)))
		if err != nil {
			return err
		}
		return database.InTenantTx(ctx, s.app, s.melati, func(tx pgx.Tx) error {
			_, err := audit.Timeline(ctx, tx, s.melati, audit.Filter{Search: term}, 0, 50)
			return err
		})
	})
}

// pageBench times GET p.path on the dashboard as p.as; withLoad runs the
// engine load on the same database meanwhile and reports the jobs/s it
// handled as load_jobs_per_sec.
func pageBench(p page, withLoad bool) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		s, err := getScale(ctx, env)
		if err != nil {
			return Result{}, err
		}
		srv := s.srv
		if p.fresh {
			srv = s.freshSv
		}
		c := s.clients[srv.URL+" "+p.as]
		rng := rand.New(rand.NewPCG(3, 4))
		var load *engineLoad
		if withLoad {
			if load, err = startLoad(ctx, env, s.name, s.tenants); err != nil {
				return Result{}, err
			}
			defer func() {
				if load != nil {
					_, _ = load.stop(context.WithoutCancel(ctx), env)
				}
			}()
		}
		var inDB, statements []float64 // per request, warm-up included
		res, err := timeIt(env.Cfg.Requests, func() error {
			inQueries.take()
			defer func() {
				d, n := inQueries.take()
				inDB = append(inDB, float64(d.Microseconds())/1000)
				statements = append(statements, float64(n))
			}()
			path := strings.ReplaceAll(p.path, "{trace}", s.traces[rng.IntN(len(s.traces))])
			path = strings.ReplaceAll(path, "{older}", strconv.FormatInt(s.olderCursor(rng), 10))
			res, err := c.Get(srv.URL + path)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: status %d", path, res.StatusCode)
			}
			return err
		})
		if err != nil {
			return res, err
		}
		// Of the timed requests only: the median time inside statements
		// and the median number of statements (round trips) per request.
		inDB, statements = inDB[len(inDB)-env.Cfg.Requests:], statements[len(statements)-env.Cfg.Requests:]
		sort.Float64s(inDB)
		sort.Float64s(statements)
		res.Metrics = append(res.Metrics, Metric{"in_queries_p50_ms", percentile(inDB, 50)},
			Metric{"statements", percentile(statements, 50)})
		if load == nil {
			return res, nil
		}
		if err := load.awaitWork(ctx); err != nil {
			return Result{}, err
		}
		rate, err := load.stop(ctx, env)
		load = nil
		if err != nil {
			return Result{}, err
		}
		res.Metrics = append(res.Metrics, Metric{"load_jobs_per_sec", rate})
		return res, nil
	}
}

// timeIt runs fn 20 times to warm caches, then n timed times, and reports
// p50/p95/p99 in milliseconds.
func timeIt(n int, fn func() error) (Result, error) {
	for i := 0; i < 20; i++ {
		if err := fn(); err != nil {
			return Result{}, err
		}
	}
	ds := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := fn(); err != nil {
			return Result{}, err
		}
		ds = append(ds, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(ds)
	return Result{Metrics: []Metric{
		{"p50_ms", percentile(ds, 50)}, {"p95_ms", percentile(ds, 95)}, {"p99_ms", percentile(ds, 99)},
	}}, nil
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signedInClient signs in through the real form and keeps the session.
func signedInClient(ctx context.Context, base, email string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(base + "/login")
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfField.FindSubmatch(body)
	if m == nil {
		return nil, errors.New("no CSRF token on /login")
	}
	form := url.Values{"email": {email}, "password": {demo.Password}, "_csrf": {string(m[1])}}
	res, err = c.PostForm(base+"/login", form)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sign in as %s: status %d", email, res.StatusCode)
	}
	return c, nil
}
