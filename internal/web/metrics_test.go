package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/web"
)

// scrape reads a Prometheus text exposition into series → value, the series
// written as exposed (labels sorted by name).
func scrape(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsAfterRealWork runs jobs through a real engine on a real
// database and checks that /metrics, scraped with the token, moved as the
// work did: enqueues, outcomes, failure classes, wait and run histograms,
// idempotent skips, missing metadata, the live gauges and the HTTP
// counters. Without the token the endpoint refuses.
func TestMetricsAfterRealWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	log := quietLog()
	reg := metrics.New(metrics.Options{
		Version: "test", Queues: []string{"default", "slow"}, SnapshotMaxAge: -1,
		Snapshot: metrics.JobSnapshot(f.db.System, nil),
		Pools:    map[string]*pgxpool.Pool{"app": f.db.App, "system": f.db.System},
	})
	engine, err := job.New(job.Config{Pool: f.db.System, Logger: log, Workers: 2, Observer: reg,
		Backoff: func(int) time.Duration { return 0 }, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	engine.Register("test.ok", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	engine.Register("test.broken", func(context.Context, *job.Job) error {
		return job.Permanent(errors.New("bad input"))
	}, job.KindOptions{})
	engine.Register("test.flaky", func(context.Context, *job.Job) error { return errors.New("timeout") }, job.KindOptions{MaxAttempts: 2})
	var locked atomic.Int32
	engine.Register("test.locked", func(context.Context, *job.Job) error {
		if locked.Add(1) == 1 {
			return job.Delay(time.Millisecond, "lock_busy:invoice-7") // another job holds the resource
		}
		return nil
	}, job.KindOptions{})

	tenant := f.tenantID("toko-bunga-melati")
	user := f.userID("budi@melati.test")
	reqCtx := reqctx.WithTrace(ctx, "4bf92f3577b34da6a3ce929d0e0e4736")
	enqueue := func(ctx context.Context, p job.EnqueueParams) {
		t.Helper()
		p.TenantID = tenant
		if p.Payload == nil {
			p.Payload = json.RawMessage(`{}`)
		}
		err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) error {
			_, err := engine.Enqueue(ctx, tx, p)
			return err
		})
		if err != nil {
			t.Fatalf("enqueue %s: %v", p.Kind, err)
		}
	}
	for i := 0; i < 3; i++ {
		enqueue(reqCtx, job.EnqueueParams{Kind: "test.ok", RequestedBy: &user})
	}
	enqueue(reqCtx, job.EnqueueParams{Kind: "test.ok", RequestedBy: &user, IdempotencyKey: "once"})
	enqueue(reqCtx, job.EnqueueParams{Kind: "test.ok", RequestedBy: &user, IdempotencyKey: "once"}) // skipped
	enqueue(ctx, job.EnqueueParams{Kind: "test.broken"})                                            // no trace, no actor
	enqueue(reqCtx, job.EnqueueParams{Kind: "test.flaky", RequestedBy: &user})
	enqueue(reqCtx, job.EnqueueParams{Kind: "test.locked", RequestedBy: &user})
	// A due job in a queue nobody works: it waits, and the gauge shows it.
	past := time.Now().Add(-90 * time.Second)
	enqueue(reqCtx, job.EnqueueParams{Kind: "test.ok", Queue: "slow", RequestedBy: &user, AvailableAt: &past})

	if err := engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	deadline := time.Now().Add(30 * time.Second)
	for f.count(`SELECT count(*) FROM jobs WHERE queue = 'default' AND state IN ('pending', 'running')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("jobs did not finish in 30s")
		}
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
	// The engine counts a finished job once its completion has committed,
	// a moment after the table shows it: stopping it waits for those
	// counts (the scrape below reads no engine state but them).
	if err := engine.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	deps := app.NewDeps(f.db.App, f.db.System, engine, clock.Database{}, log)
	deps.Metrics, deps.MetricsToken = reg, "s3cret"
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	get := func(auth string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return res, b.String()
	}
	if res, _ := get(""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", res.StatusCode)
	}
	if res, _ := get("Bearer wrong"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: status %d, want 401", res.StatusCode)
	}
	if res, _ := http.Get(srv.URL + "/healthz"); res != nil {
		res.Body.Close()
	}
	res, body := get("Bearer s3cret")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("with token: status %d: %s", res.StatusCode, body)
	}
	m := scrape(t, body)
	want := map[string]float64{
		`jejak_jobs_enqueued_total{kind="test.ok"}`:                                5,
		`jejak_jobs_enqueued_total{kind="test.broken"}`:                            1,
		`jejak_jobs_enqueued_total{kind="test.flaky"}`:                             1,
		`jejak_jobs_idempotent_skips_total{kind="test.ok"}`:                        1,
		`jejak_jobs_missing_metadata_total{field="trace",kind="test.broken"}`:      1,
		`jejak_jobs_missing_metadata_total{field="actor",kind="test.broken"}`:      1,
		`jejak_jobs_finished_total{kind="test.ok",outcome="succeeded"}`:            4,
		`jejak_jobs_finished_total{kind="test.broken",outcome="dead"}`:             1,
		`jejak_jobs_finished_total{kind="test.flaky",outcome="retried"}`:           1,
		`jejak_jobs_finished_total{kind="test.flaky",outcome="dead"}`:              1,
		`jejak_job_failures_total{class="permanent",kind="test.broken"}`:           1,
		`jejak_job_failures_total{class="transient",kind="test.flaky"}`:            2,
		`jejak_job_run_seconds_count{kind="test.ok"}`:                              4,
		`jejak_job_wait_seconds_count{kind="test.flaky"}`:                          2,
		`jejak_jobs_delayed_total{kind="test.locked",reason="lock_busy"}`:          1,
		`jejak_jobs_lock_delayed_total{kind="test.locked"}`:                        1,
		`jejak_jobs_finished_total{kind="test.locked",outcome="succeeded"}`:        1,
		`jejak_jobs{state="dead"}`:                                                 2,
		`jejak_jobs{state="pending"}`:                                              1,
		`jejak_jobs{state="running"}`:                                              0,
		`jejak_http_requests_total{code="200",method="GET",route="/healthz"}`:      1,
		`jejak_http_requests_total{code="401",method="GET",route="/metrics"}`:      2,
		`jejak_build_info{goversion="` + goVersion(m0(body)) + `",version="test"}`: 1,
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	if age := m[`jejak_queue_oldest_pending_age_seconds{queue="slow"}`]; age < 80 {
		t.Errorf("oldest pending age of queue slow = %v, want ≥ 80s", age)
	}
	if age, ok := m[`jejak_queue_oldest_pending_age_seconds{queue="default"}`]; !ok || age != 0 {
		t.Errorf("oldest pending age of the drained default queue = %v (present %v), want 0", age, ok)
	}
	for _, name := range []string{`jejak_outbox_messages{state="pending"}`, `jejak_outbox_oldest_pending_age_seconds`,
		`jejak_db_pool_max_connections{pool="system"}`} {
		if _, ok := m[name]; !ok {
			t.Errorf("%s is not exported", name)
		}
	}
	for series := range m {
		if strings.Contains(series, "tenant") || strings.Contains(series, "job_id") {
			t.Errorf("series %s carries an unbounded label", series)
		}
	}
}

// m0 and goVersion pick the Go version label out of the exposition, which
// the test cannot know in advance.
func m0(body string) string {
	i := strings.Index(body, `jejak_build_info{goversion="`)
	if i < 0 {
		return ""
	}
	return body[i+len(`jejak_build_info{goversion="`):]
}

func goVersion(rest string) string {
	if i := strings.IndexByte(rest, '"'); i >= 0 {
		return rest[:i]
	}
	return ""
}

// TestMetricsLoopbackOnlyWithoutToken: with no token configured, a remote
// peer is refused, a direct loopback one served, and a loopback peer that
// relays for someone else (a reverse proxy on the same host: it adds a
// forwarding header, maybe empty) refused.
func TestMetricsLoopbackOnlyWithoutToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHandler(f.db, f.jobs, quietLog(), 0)
	for _, tc := range []struct {
		remote, header, value string
		want                  int
	}{
		{"203.0.113.9:5555", "", "", http.StatusForbidden},
		{"203.0.113.9:5555", "X-Forwarded-For", "127.0.0.1", http.StatusForbidden},
		{"127.0.0.1:5555", "", "", http.StatusOK},
		{"[::1]:5555", "", "", http.StatusOK},
		{"127.0.0.1:5555", "X-Forwarded-For", "203.0.113.9", http.StatusForbidden},
		{"127.0.0.1:5555", "Forwarded", "for=203.0.113.9", http.StatusForbidden},
		{"127.0.0.1:5555", "X-Real-Ip", "203.0.113.9", http.StatusForbidden},
		{"127.0.0.1:5555", "X-Forwarded-Host", "metrics.example", http.StatusForbidden},
		{"127.0.0.1:5555", "X-Forwarded-For", "", http.StatusForbidden},
		{"127.0.0.1:5555", "Forwarded", "", http.StatusForbidden},
		{"127.0.0.1:5555", "Via", "1.1 proxy", http.StatusForbidden},
		{"127.0.0.1:5555", "X-Forwarded-Proto", "https", http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = tc.remote
		if tc.header != "" {
			req.Header[http.CanonicalHeaderKey(tc.header)] = []string{tc.value}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("from %s with %s %q: status %d, want %d", tc.remote, tc.header, tc.value, rec.Code, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "jejak_build_info") {
			t.Errorf("from %s: no metrics in the answer", tc.remote)
		}
	}
}

// TestMetricsCountCancelledJobs: every way a job ends cancelled counts once
// under outcome "cancelled": a waiting dependent cancelled when the job it
// depends on dies, a dependent enqueued after that, and the dead letter
// itself when staff discard it through the dashboard (a second discard of
// the same job changes nothing and counts nothing).
func TestMetricsCountCancelledJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	log := quietLog()
	reg := metrics.New(metrics.Options{Version: "test", SnapshotMaxAge: -1, Snapshot: metrics.JobSnapshot(f.db.System, nil)})
	engine, err := job.New(job.Config{Pool: f.db.System, Logger: log, Workers: 1, Observer: reg,
		Backoff: func(int) time.Duration { return 0 }, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	engine.Register("test.broken", func(context.Context, *job.Job) error {
		return job.Permanent(errors.New("bad input"))
	}, job.KindOptions{})
	engine.Register("test.after", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	tenant := f.tenantID("toko-bunga-melati")
	enqueue := func(p job.EnqueueParams) int64 {
		t.Helper()
		p.TenantID, p.Payload = tenant, json.RawMessage(`{}`)
		var id int64
		err := database.InTx(ctx, f.db.System, func(tx pgx.Tx) error {
			res, err := engine.Enqueue(ctx, tx, p)
			id = res.ID
			return err
		})
		if err != nil {
			t.Fatalf("enqueue %s: %v", p.Kind, err)
		}
		return id
	}
	first := enqueue(job.EnqueueParams{Kind: "test.broken"})
	waiting := enqueue(job.EnqueueParams{Kind: "test.after", DependsOn: &first})

	deps := app.NewDeps(f.db.App, f.db.System, engine, clock.Database{}, log)
	deps.Metrics, deps.MetricsToken = reg, "s3cret"
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	finished := func() map[string]float64 {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		out := map[string]float64{}
		for series, v := range scrape(t, b.String()) {
			if strings.HasPrefix(series, "jejak_jobs_finished_total{") {
				out[series] = v
			}
		}
		return out
	}
	if m := finished(); len(m) != 0 {
		t.Fatalf("before any work: %v", m)
	}

	if err := engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	deadline := time.Now().Add(30 * time.Second)
	for f.count(`SELECT count(*) FROM jobs WHERE id = $1 AND state = 'cancelled'`, waiting) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dependent was not cancelled in 30s")
		}
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
	late := enqueue(job.EnqueueParams{Kind: "test.after", DependsOn: &first}) // its dependency is dead already
	if st := f.jobState(late); st != "cancelled" {
		t.Fatalf("late dependent is %s, want cancelled", st)
	}
	want := map[string]float64{
		`jejak_jobs_finished_total{kind="test.broken",outcome="dead"}`:     1,
		`jejak_jobs_finished_total{kind="test.after",outcome="cancelled"}`: 2,
	}
	if m := finished(); fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("after the dependency died: %v, want %v", m, want)
	}

	// Staff discard through this server, whose console reports to reg.
	staff := (&fixture{t: t, db: f.db, srv: srv}).client()
	staff.login("admin@jejak.test")
	path := fmt.Sprintf("/admin/jobs/%d/discard", first)
	if a := staff.post(path, staff.withCSRF(url.Values{"reason": {"input cannot be fixed"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("discard: %d %.300s", a.status, a.body)
	}
	// A second discard finds no dead letter: the page says nothing changed,
	// and the counter below must not move again.
	staff.post(path, staff.withCSRF(url.Values{"reason": {"again"}}), false)
	want[`jejak_jobs_finished_total{kind="test.broken",outcome="cancelled"}`] = 1
	if m := finished(); fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("after the discard: %v, want %v", m, want)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE state = 'cancelled'`); n != 3 {
		t.Fatalf("%d cancelled jobs, want the 3 counted", n)
	}
}
