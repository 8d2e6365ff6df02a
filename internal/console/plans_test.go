package console_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/incident"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

// The page plans test: each page's queries are captured as the services
// run them (SQL and arguments, through a pgx tracer), then re-run under
// EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) in the same role and tenant. The
// table is seeded at two sizes (a big tenant's rows and events grow ten
// times; a small tenant's stay the same and are the oldest), without
// VACUUM, so no page is all-visible: the state of a churning jobs table.
// A page whose shared buffers grow with the table reads rows it does not
// show.

// captured is one named sqlc query as a service ran it.
type captured struct {
	name string
	sql  string
	args []any
}

type recorder struct {
	mu sync.Mutex
	qs []captured
}

var sqlcName = regexp.MustCompile(`^-- name: (\w+)`)

func (r *recorder) record(sql string, rawArgs []any) {
	m := sqlcName.FindStringSubmatch(sql)
	if m == nil {
		return
	}
	args := make([]any, 0, len(rawArgs))
	for _, a := range rawArgs {
		if _, mode := a.(pgx.QueryExecMode); !mode {
			args = append(args, a)
		}
	}
	r.mu.Lock()
	r.qs = append(r.qs, captured{name: m[1], sql: sql, args: args})
	r.mu.Unlock()
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.record(d.SQL, d.Args)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Tenant reads send their statements in pipelines (database.ReadTenant).
func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *recorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.record(d.SQL, d.Args)
}

func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *recorder) take() []captured {
	r.mu.Lock()
	defer r.mu.Unlock()
	qs := r.qs
	r.qs = nil
	return qs
}

// tracedPool is a pool like database.Open's, in role, whose named queries
// rec captures.
func tracedPool(t *testing.T, url, role string, rec *recorder) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.Tracer = rec
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+role)
		return err
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// plan is what one query's EXPLAIN says.
type plan struct {
	Buffers  int64    // shared blocks hit + read by the whole plan
	Indexes  []string // indexes scanned
	SeqJobs  bool     // a sequential scan of jobs or audit_sealed
	Parallel []string // relations scanned by parallel workers
}

// walkPlan collects the scans the plan executed (a branch switched off by
// a false parameter is planned but never runs: zero loops).
func walkPlan(top map[string]any, p *plan) {
	for _, n := range testdb.PlanNodes(top) {
		if loops, _ := n["Actual Loops"].(float64); loops == 0 {
			continue
		}
		if ix, ok := n["Index Name"].(string); ok {
			p.Indexes = append(p.Indexes, ix)
		}
		if n["Node Type"] == "Seq Scan" && (n["Relation Name"] == "jobs" || n["Relation Name"] == "audit_sealed") {
			p.SeqJobs = true
		}
		if rel, ok := n["Relation Name"].(string); ok && n["Parallel Aware"] == true {
			p.Parallel = append(p.Parallel, rel)
		}
	}
}

// explain runs q under EXPLAIN ANALYZE as role (and tenant, for the app
// role), in a transaction rolled back afterwards, with settings (SET LOCAL
// statements) applied first.
func explain(t *testing.T, db *testdb.DB, role string, tenantID int64, q captured, settings ...string) plan {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
		t.Fatal(err)
	}
	for _, set := range settings {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	if tenantID > 0 {
		if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", strconv.FormatInt(tenantID, 10)); err != nil {
			t.Fatal(err)
		}
	}
	var raw []byte
	args := append([]any{pgx.QueryExecModeExec}, q.args...)
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q.sql, args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", q.name, err)
	}
	var out []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain %s: %v", q.name, err)
	}
	top := out[0].Plan
	p := plan{}
	for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
		if v, ok := top[k].(float64); ok {
			p.Buffers += int64(v)
		}
	}
	walkPlan(top, &p)
	return p
}

// planSeed grows the jobs table and the big tenant's trail. The small
// tenant's rows come first (lowest ids and seqs), so a plan that walks
// newest-first past other rows pays for all of them.
type planSeed struct {
	db          *testdb.DB
	big, small  int64
	staff       int64
	jobs, evs   int // the big tenant's rows so far
	tenantNames tenant.Names
}

func (s *planSeed) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := s.db.Admin.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("seed: %v\n%s", err, sql)
	}
}

// seedJobsSQL inserts jobs g in ($2, $3] of tenant $1 with state $4 (or a
// mix when $4 is empty): in the mix 90% succeeded, 4% pending and due, 3%
// dead, 3% cancelled, like the large-data seeder, and their trace index.
const seedJobsSQL = `
WITH ins AS (
INSERT INTO jobs (tenant_id, kind, queue, state, payload, attempt, max_attempts, available_at, created_at,
    attempted_at, finished_at, worker_id, lease_expires_at, last_error, error_class, flagged, trace_id,
    requested_at, payload_hash)
SELECT $1::bigint, kind, 'default', st, jsonb_build_object('g', g), CASE WHEN st = 'pending' THEN 0 ELSE 1 END, 3,
    CASE WHEN $5::boolean THEN now() + interval '1 hour' ELSE ts END, ts,
    CASE WHEN st <> 'pending' THEN ts END,
    CASE WHEN st IN ('succeeded', 'dead', 'cancelled') THEN ts END,
    CASE WHEN st <> 'pending' THEN 'w' END,
    CASE WHEN st = 'running' THEN now() + interval '1 hour' END,
    CASE WHEN st = 'dead' THEN 'boom ' || g END,
    CASE WHEN st = 'dead' THEN (ARRAY['transient', 'permanent', 'policy'])[1 + g % 3] END,
    st = 'dead' AND g % 3 = 2, md5('t' || $1::bigint || g), ts, sha256(convert_to(g::text, 'UTF8'))
FROM (
    SELECT g, now() - interval '1 day' + g * interval '1 second' AS ts,
        CASE WHEN $1::bigint = $6::bigint THEN 'small.kind' ELSE (ARRAY['email', 'sweep', 'points'])[1 + g % 3] END AS kind,
        CASE WHEN $4::text <> '' THEN $4::text
             WHEN g % 100 < 90 THEN 'succeeded' WHEN g % 100 < 94 THEN 'pending'
             WHEN g % 100 < 97 THEN 'dead' ELSE 'cancelled' END AS st
    FROM generate_series($2::bigint + 1, $3::bigint) g
) x
RETURNING trace_id, id, tenant_id, created_at, requested_by)
INSERT INTO job_traces (trace_id, job_id, tenant_id, created_at, requested_by)
SELECT trace_id, id, tenant_id, created_at, requested_by FROM ins`

// seedEventsSQL appends events ($2, $3] to tenant $1's trail as the
// sealer leaves them in audit_sealed (with no leaves: the plans read
// events, not the log), where the indexes the plans use are: one a
// minute from 2026-01-01, the first 100 by staff user $4, the rest by the
// system; every 500th carries the trace id of the tenant's job of that
// number (seedJobsSQL), so a trace spans a job and an event.
const seedEventsSQL = `
INSERT INTO audit_sealed (tenant_id, id, actor_kind, actor_id, action, entity, entity_id, occurred_at, trace_id)
SELECT $1::bigint, nextval('audit_events_id_seq'), CASE WHEN s <= 100 THEN 'staff' ELSE 'system' END, CASE WHEN s <= 100 THEN $4::bigint END,
    'job.succeeded', 'job', s::text, timestamptz '2026-01-01 00:00:00+00' + s * interval '1 minute',
    CASE WHEN s % 500 = 0 THEN md5('t' || $1::bigint || s) ELSE '' END
FROM generate_series($2::bigint + 1, $3::bigint) s`

func (s *planSeed) growTo(t *testing.T, jobs, events int) {
	t.Helper()
	s.exec(t, seedJobsSQL, s.big, s.jobs, jobs, "", false, s.small)
	// And one job in fifty scheduled an hour ahead (numbered apart, so
	// their trace ids differ): the overview's "due now" must not count
	// them per refresh.
	s.exec(t, seedJobsSQL, s.big, 1_000_000+s.jobs/50, 1_000_000+jobs/50, "pending", true, s.small)
	s.exec(t, seedEventsSQL, s.big, s.evs, events, s.staff)
	s.jobs, s.evs = jobs, events
	if err := job.RebuildCounts(context.Background(), s.db.System); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "ANALYZE jobs; ANALYZE audit_sealed; ANALYZE audit_unsealed; ANALYZE job_dead_groups; ANALYZE job_counts")
}

// traceOf is the trace id seedJobsSQL gives job g of tenant.
func traceOf(tenant int64, g int) string {
	return fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("t%d%d", tenant, g))))
}

var sqlParam = regexp.MustCompile(`\$(\d+)(::([a-z]+(\[\])?))?`)

// claimArgs are the claim's parameters as the engine passes them for a
// batch of 100 in the default queue (see the list at the top of
// claim.sql); a parameter added later gets a neutral value for its type.
func claimArgs(sql string) []any {
	// $1–$11 as the engine passes them, $12 and $13 the slot of a worker
	// alone (every tenant); the rest by their types.
	args := []any{nil, "default", "w", 100, 60.0, 0, 100, 1, 0, true, 100, 1, 0}
	types := map[int]string{}
	n := 0
	for _, m := range sqlParam.FindAllStringSubmatch(sql, -1) {
		i, _ := strconv.Atoi(m[1])
		n = max(n, i)
		if m[3] != "" {
			types[i] = m[3]
		}
	}
	for i := len(args) + 1; i <= n; i++ {
		switch types[i] {
		case "text[]":
			args = append(args, []string{})
		case "bigint[]", "int[]":
			args = append(args, []int64{})
		case "bool", "boolean":
			args = append(args, false)
		case "int", "bigint", "smallint":
			args = append(args, 0)
		default:
			args = append(args, nil)
		}
	}
	return args
}

// pageCase is one page's reads: the service call, and the index each
// named query must use (when it reads jobs or audit_events).
type pageCase struct {
	name   string
	role   string // jejak_app (tenant pages) or jejak_system
	tenant func(*planSeed) int64
	run    func(ctx context.Context, s *planSeed, c *console.Service, a *audit.Service) error
	want   map[string]string // query name -> indexes it must scan (space-separated)
}

func TestPagePlansDoNotGrowWithTable(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ids := newTenants(t, db, 2)
	s := &planSeed{db: db, big: ids[0], small: ids[1], staff: staffUser(t, db)}
	// The small tenant: ten jobs in each state, five of them scheduled an
	// hour ahead, all older than every job of the big tenant.
	n := 0
	for _, st := range []string{"succeeded", "cancelled", "dead", "pending", "running"} {
		s.exec(t, seedJobsSQL, s.small, n, n+10, st, false, s.small)
		n += 10
	}
	s.exec(t, seedJobsSQL, s.small, n, n+5, "pending", true, s.small)
	// Job ids continue from the small tenant's rows.
	s.jobs = 0

	appRec, sysRec := &recorder{}, &recorder{}
	app := tracedPool(t, db.URL, "jejak_app", appRec)
	system := tracedPool(t, db.URL, "jejak_system", sysRec)
	e := newEngine(t, db, job.Config{})
	tenants := tenant.NewService(app, system, nil)
	as := audit.NewService(app, system)
	c := console.New(console.Config{App: app, System: system, Kinds: e, Tenants: tenants, Audit: as, ScanWindow: 1000})
	incidents := incident.NewService(system)
	smallSlug := "tenant-2"
	small := func(s *planSeed) int64 { return s.small }
	big := func(s *planSeed) int64 { return s.big }
	far := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	farEnd := far.Add(time.Hour)

	cases := []pageCase{
		{"tenant jobs: succeeded", "jejak_app", small, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.TenantJobs(ctx, s.small, job.StateSucceeded, 0)
			return err
		}, map[string]string{"JobTenantList": "jobs_pkey"}},
		{"tenant jobs: cancelled", "jejak_app", small, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.TenantJobs(ctx, s.small, job.StateCancelled, 0)
			return err
		}, map[string]string{"JobTenantList": "jobs_cancelled_tenant_idx"}},
		{"tenant jobs: cancelled, big tenant", "jejak_app", big, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.TenantJobs(ctx, s.big, job.StateCancelled, 0)
			return err
		}, map[string]string{"JobTenantList": "jobs_cancelled_tenant_idx"}},
		{"tenant jobs: all", "jejak_app", small, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.TenantJobs(ctx, s.small, "", 0)
			return err
		}, map[string]string{"JobTenantList": "jobs_pkey"}},
		// The tabs' counts of a small tenant read its own rows only,
		// however many jobs the others have.
		{"tenant jobs with counts", "jejak_app", small, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			p, err := c.TenantJobsWithCounts(ctx, s.small, console.TenantJobQuery{}, 0)
			if err == nil && (p.Counts[0].N != 55 || p.Counts[0].AtLeast) {
				err = fmt.Errorf("counts %+v, want 55 in all", p.Counts)
			}
			return err
		}, map[string]string{"JobTenantList": "", "JobTenantCountCapped": ""}},
		{"staff jobs: one tenant", "jejak_system", nil, func(ctx context.Context, _ *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.Jobs(ctx, console.JobQuery{Tenant: smallSlug}, 0)
			return err
		}, map[string]string{"JobAdminList": "jobs_pkey"}},
		{"staff jobs: a kind that rarely matches", "jejak_system", nil, func(ctx context.Context, _ *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.Jobs(ctx, console.JobQuery{Kind: "small.kind"}, 0)
			return err
		}, map[string]string{"JobAdminList": "jobs_id_idx"}},
		{"dead letters", "jejak_system", nil, func(ctx context.Context, _ *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.Dead(ctx, console.DeadQuery{}, 0)
			return err
		}, map[string]string{"JobAdminDeadGroups": "", "JobAdminDeadList": "jobs_dead_all_idx"}},
		{"dead letters: a rare kind", "jejak_system", nil, func(ctx context.Context, _ *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.Dead(ctx, console.DeadQuery{Kind: "small.kind"}, 0)
			return err
		}, map[string]string{"JobAdminDeadGroups": "", "JobAdminDeadList": "jobs_dead_kind_idx"}},
		{"dead letters: one tenant", "jejak_system", nil, func(ctx context.Context, _ *planSeed, c *console.Service, _ *audit.Service) error {
			_, err := c.Dead(ctx, console.DeadQuery{Tenant: smallSlug}, 0)
			return err
		}, map[string]string{"JobAdminDeadGroups": "", "JobAdminDeadList": "jobs_dead_tenant_idx"}},
		{"overview", "jejak_system", nil, func(ctx context.Context, s *planSeed, c *console.Service, _ *audit.Service) error {
			o, err := c.Overview(ctx)
			// The leader's count (RebuildCounts in growTo) leaves the
			// jobs scheduled ahead out of "due now".
			if want := int64(s.jobs/50 + 5); err == nil && o.Totals.Pending-o.Totals.Due != want {
				err = fmt.Errorf("overview: pending %d, due %d; want %d scheduled ahead", o.Totals.Pending, o.Totals.Due, want)
			}
			return err
		}, map[string]string{"JobAdminLiveCounts": "", "JobAdminOldestDue": "jobs_pending_at_idx", "JobCountsScheduledAt": ""}},
		{"timeline: actor kind staff", "jejak_app", big, func(ctx context.Context, s *planSeed, _ *console.Service, a *audit.Service) error {
			_, err := a.Timeline(ctx, s.big, audit.Filter{ActorKind: audit.ActorStaff}, 0, 50, false)
			return err
		}, map[string]string{"AuditEventTimeline": "audit_events_actor_kind_idx"}},
		{"timeline: a far-back hour", "jejak_app", big, func(ctx context.Context, s *planSeed, _ *console.Service, a *audit.Service) error {
			_, err := a.Timeline(ctx, s.big, audit.Filter{From: &far, To: &farEnd}, 0, 50, false)
			return err
		}, map[string]string{"AuditEventTimelineByTime": "audit_events_time_idx"}},
		{"timeline: a far-back hour, older page", "jejak_app", big, func(ctx context.Context, s *planSeed, _ *console.Service, a *audit.Service) error {
			_, err := a.Timeline(ctx, s.big, audit.Filter{From: &far, To: &farEnd}, 30, 50, false)
			return err
		}, map[string]string{"AuditEventTimelineByTime": "audit_events_time_idx"}},
		{"timeline: from a far-back day on", "jejak_app", big, func(ctx context.Context, s *planSeed, _ *console.Service, a *audit.Service) error {
			_, err := a.Timeline(ctx, s.big, audit.Filter{From: &far}, 0, 50, false)
			return err
		}, map[string]string{"AuditEventTimelineByTime": "audit_events_time_idx"}},
		// The incident page: a trace's job, its event and the other
		// sections in one statement, each through an index keyed by trace
		// id, the job by primary key.
		{"incident page", "jejak_system", nil, func(ctx context.Context, s *planSeed, _ *console.Service, _ *audit.Service) error {
			in, err := incidents.Get(ctx, traceOf(s.big, 500))
			if err == nil && (len(in.Jobs) != 1 || len(in.Entries) < 2) {
				err = fmt.Errorf("incident of job 500's trace: %d jobs, %d entries", len(in.Jobs), len(in.Entries))
			}
			return err
		}, map[string]string{"TraceIncident": "job_traces_trace_idx jobs_pkey audit_events_trace_idx outbox_traces_trace_idx"}},
	}

	sizes := []struct{ jobs, events int }{{2_000, 2_000}, {20_000, 20_000}}
	got := make([]map[string]int64, len(sizes))
	for i, size := range sizes {
		s.growTo(t, size.jobs, size.events)
		got[i] = map[string]int64{}
		// The claim must keep its plan: the new indexes are not for it.
		claimSQL, err := os.ReadFile("../job/claim.sql")
		if err != nil {
			t.Fatal(err)
		}
		claim := explain(t, db, "jejak_system", 0, captured{name: "claim", sql: string(claimSQL),
			args: claimArgs(string(claimSQL))})
		for _, ix := range claim.Indexes {
			if ix != "jobs_claim_idx" && ix != "jobs_pkey" {
				t.Errorf("the claim scans %s (all: %v)", ix, claim.Indexes)
			}
		}
		// Its buffers (index inserts of 100 updated rows) are logged only.
		t.Logf("claim of 100 jobs (rolled back): %d shared buffers at %d jobs", claim.Buffers, size.jobs)
		for _, pc := range cases {
			appRec.take()
			sysRec.take()
			if err := pc.run(ctx, s, c, as); err != nil {
				t.Fatalf("%s: %v", pc.name, err)
			}
			qs := sysRec.take()
			var tenantID int64
			if pc.role == "jejak_app" {
				qs, tenantID = appRec.take(), pc.tenant(s)
			}
			seen := map[string]bool{}
			for _, q := range qs {
				want, ok := pc.want[q.name]
				if !ok {
					continue
				}
				seen[q.name] = true
				p := explain(t, db, pc.role, tenantID, q)
				if p.SeqJobs {
					t.Errorf("%s: %s scans a whole table sequentially", pc.name, q.name)
				}
				for _, ix := range strings.Fields(want) {
					if !slices.Contains(p.Indexes, ix) {
						t.Errorf("%s: %s scans %v, want %s", pc.name, q.name, p.Indexes, ix)
					}
				}
				if q.name == "TraceIncident" {
					// The trace tables are filled in bulk by triggers and
					// their statistics lag (at 1M jobs without any, the
					// lookup became a parallel scan whose workers took
					// 10-150 ms to start). With parallelism made free, as
					// a big table with a stale estimate makes it look, the
					// trace tables and the tables reached by key still
					// stay serial.
					cheap := explain(t, db, pc.role, tenantID, q, "SET LOCAL parallel_setup_cost = 0",
						"SET LOCAL parallel_tuple_cost = 0", "SET LOCAL min_parallel_table_scan_size = 0",
						"SET LOCAL min_parallel_index_scan_size = 0")
					for _, rel := range cheap.Parallel {
						if rel == "job_traces" || rel == "outbox_traces" || rel == "jobs" || rel == "outbox_messages" {
							t.Errorf("%s: %s scans %s in parallel (all parallel scans: %v)", pc.name, q.name, rel, cheap.Parallel)
						}
					}
				}
				got[i][pc.name+" / "+q.name] += p.Buffers
			}
			for name := range pc.want {
				if !seen[name] {
					t.Errorf("%s: the page did not run %s", pc.name, name)
				}
			}
		}
	}
	// Growing the table ten times may add a level to a B-tree (one more
	// block per descent); a plan that reads rows it does not show grows
	// roughly ten times instead.
	for key, small := range got[0] {
		large := got[1][key]
		t.Logf("%-60s shared buffers: %5d at %d jobs/events, %5d at %d", key, small, sizes[0].jobs, large, sizes[1].jobs)
		if large > small+small/2+8 {
			t.Errorf("%s: %d shared buffers at %d rows, %d at %d: the page reads rows it does not show",
				key, small, sizes[0].jobs, large, sizes[1].jobs)
		}
	}
}
