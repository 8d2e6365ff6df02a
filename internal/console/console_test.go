package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTenants inserts n tenants through the superuser pool and returns ids.
func newTenants(t *testing.T, db *testdb.DB, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		err := db.Admin.QueryRow(context.Background(),
			"INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", fmt.Sprintf("tenant-%d", i+1)).Scan(&ids[i])
		if err != nil {
			t.Fatalf("insert tenant: %v", err)
		}
	}
	return ids
}

// newEngine is an enqueue-only engine (the tests claim by hand).
func newEngine(t *testing.T, db *testdb.DB, cfg job.Config) *job.Engine {
	t.Helper()
	cfg.Pool, cfg.Logger = db.System, quiet
	e, err := job.New(cfg)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	return e
}

// newConsole is the console over db, with e's kinds and clk.
func newConsole(db *testdb.DB, e *job.Engine, clk clock.Clock) *console.Service {
	return console.New(console.Config{App: db.App, System: db.System, Clock: clk, Kinds: e,
		Tenants: tenant.NewService(db.App, db.System, clk), Audit: audit.NewService(db.App, db.System)})
}

func enqueueTenant(t *testing.T, db *testdb.DB, e *job.Engine, p job.EnqueueParams) job.Enqueued {
	t.Helper()
	var out job.Enqueued
	err := database.InTenantTx(context.Background(), db.App, p.TenantID, func(tx pgx.Tx) (err error) {
		out, err = e.Enqueue(context.Background(), tx, p)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return out
}

func staffUser(t *testing.T, db *testdb.DB) int64 {
	t.Helper()
	var id int64
	err := db.Admin.QueryRow(context.Background(),
		`INSERT INTO users (email, name, password_hash, staff_role) VALUES ('ops@jejak.test', 'Ops', 'x', 'support') RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatalf("insert staff user: %v", err)
	}
	return id
}

func deadJob(t *testing.T, db *testdb.DB, e *job.Engine, tenant int64) int64 {
	t.Helper()
	enq := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{}`)})
	js, err := e.Claim(context.Background(), "w", 10)
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %d %v", len(js), err)
	}
	if _, err := e.Fail(context.Background(), "w", js[0].ID, job.Policy(errors.New("approval revoked"))); err != nil {
		t.Fatalf("fail: %v", err)
	}
	return enq.ID
}

// TestActOnDeadConcurrentRetriesApplyOnce: operators retrying the same
// dead letter at once change it once and record one event.
func TestActOnDeadConcurrentRetriesApplyOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	id := deadJob(t, db, e, tenants[0])
	c := newConsole(db, e, nil)

	var ok, notDead atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Act(context.Background(), console.Operator{UserID: staff}, console.ActionRetry, id, fmt.Sprintf("operator %d", i))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, console.ErrNotDead):
				notDead.Add(1)
			default:
				t.Errorf("retry: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || notDead.Load() != 5 {
		t.Fatalf("ok=%d notDead=%d, want 1 and 5", ok.Load(), notDead.Load())
	}
	p, err := audit.Timeline(context.Background(), db.System, tenants[0], audit.Filter{Action: "job.replayed"}, 0, 10)
	if err != nil || len(p.Rows) != 1 || p.Rows[0].ActorKind != audit.ActorStaff {
		t.Fatalf("replay events: %+v %v", p.Rows, err)
	}
	other, _ := audit.Timeline(context.Background(), db.System, tenants[1], audit.Filter{}, 0, 10)
	if len(other.Rows) != 0 {
		t.Fatalf("other tenant's trail has %d events", len(other.Rows))
	}
	var events int
	if err := db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM outbox_messages WHERE tenant_id = $1
		AND event_type = 'job.dead_letter.retried' AND aggregate_id = $2::bigint::text
		AND requested_by = $3`, tenants[0], id, staff).Scan(&events); err != nil || events != 1 {
		t.Fatalf("%d job.dead_letter.retried events requested by the operator (%v), want 1", events, err)
	}
	v, err := c.Job(context.Background(), id)
	r := v.Job
	if err != nil || r.State != job.StatePending || r.Flagged || len(r.Errors) != 1 || r.MaxAttempts != r.Attempt+job.DefaultMaxAttempts {
		t.Fatalf("after retry: %+v %v", r, err)
	}
}

func TestActOnDeadRefusals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 1)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	id := deadJob(t, db, e, tenants[0])
	c := newConsole(db, e, nil)
	ctx := context.Background()
	cases := []struct {
		name   string
		op     console.Operator
		action console.Action
		id     int64
		reason string
		want   error
	}{
		{"blank reason", console.Operator{UserID: staff}, console.ActionRetry, id, "  \n ", console.ErrReasonRequired},
		{"long reason", console.Operator{UserID: staff}, console.ActionDiscard, id, fmt.Sprintf("%0501d", 0), console.ErrReasonTooLong},
		{"no operator", console.Operator{}, console.ActionRetry, id, "why", job.ErrInvalidJob},
		{"unknown action", console.Operator{UserID: staff}, "explode", id, "why", console.ErrUnknownAction},
		{"unknown job", console.Operator{UserID: staff}, console.ActionRetry, id + 100, "why", job.ErrNotFound},
	}
	for _, tc := range cases {
		if _, err := c.Act(ctx, tc.op, tc.action, tc.id, tc.reason); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if v, _ := c.Job(ctx, id); v.Job.State != job.StateDead {
		t.Fatalf("refusals changed the job: %s", v.Job.State)
	}
}

// TestStatsRollupAndOverview: recorded attempts land in their minute and
// the overview's totals, series and live counts agree with what happened.
func TestStatsRollupAndOverview(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	clk := clock.NewFrozen(time.Date(2026, 11, 30, 8, 0, 30, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk})
	ctx := context.Background()
	// Four jobs run: two succeed and one dies at 08:00, one fails (and
	// will retry) at 08:02; three more stay pending, due since 08:00:30.
	for i := 0; i < 4; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	js, err := e.Claim(ctx, "w", 10)
	if err != nil || len(js) != 4 {
		t.Fatalf("claim: %d %v", len(js), err)
	}
	for i := 0; i < 3; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	byTenant := map[int64][]*job.Job{}
	for _, j := range js {
		byTenant[j.TenantID] = append(byTenant[j.TenantID], j)
	}
	for _, j := range byTenant[tenants[0]] {
		if err := e.Complete(ctx, "w", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := e.Fail(ctx, "w", byTenant[tenants[1]][0].ID, job.Permanent(errors.New("bad"))); err != nil || st != job.StateDead {
		t.Fatalf("fail: %s %v", st, err)
	}
	clk.Advance(2 * time.Minute)
	if st, err := e.Fail(ctx, "w", byTenant[tenants[1]][1].ID, errors.New("timeout")); err != nil || st != job.StatePending {
		t.Fatalf("fail: %s %v", st, err)
	}
	o, err := newConsole(db, e, clk).Overview(ctx)
	if err != nil {
		t.Fatalf("overview: %v", err)
	}
	if o.Totals.Pending != 4 || o.Totals.Succeeded != 2 || o.Totals.Failed != 2 || o.Totals.Died != 1 || len(o.Minutes) != 60 {
		t.Fatalf("totals %+v, %d minutes", o.Totals, len(o.Minutes))
	}
	last, earlier := o.Minutes[59], o.Minutes[57]
	if last.Failed != 1 || earlier.Succeeded != 2 || earlier.Dead != 1 || !last.Minute.Equal(time.Date(2026, 11, 30, 8, 2, 0, 0, time.UTC)) {
		t.Fatalf("series: last %+v, two minutes earlier %+v", last, earlier)
	}
	if o.OldestDue == nil || o.Lag() != 2*time.Minute {
		t.Fatalf("lag %v", o.Lag())
	}
}

// TestStatsCacheSharesOneLoad: concurrent viewers of a stale cache cause
// one load; a fresh snapshot is served without loading.
func TestStatsCacheSharesOneLoad(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	c := console.NewStatsCache(func(context.Context) (*console.Overview, error) {
		loads.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return &console.Overview{}, nil
	}, time.Hour)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Get(context.Background()); err != nil {
				t.Errorf("get: %v", err)
			}
		}()
	}
	// Let the first load finish once it has started; the other callers
	// either wait for it or arrive after it and find a fresh snapshot.
	<-started
	close(release)
	wg.Wait()
	if _, _, err := c.Get(context.Background()); err != nil || loads.Load() != 1 {
		t.Fatalf("loads = %d (%v), want 1", loads.Load(), err)
	}
	always := console.NewStatsCache(func(context.Context) (*console.Overview, error) {
		loads.Add(1)
		return &console.Overview{}, nil
	}, -1)
	_, _, _ = always.Get(context.Background())
	_, _, _ = always.Get(context.Background())
	if loads.Load() != 3 {
		t.Fatalf("negative max age: loads = %d, want 3", loads.Load())
	}
}

// TestDeadGroupsFollowOperatorActions: retry and discard move dead
// letters out of the maintained groups the dead-letter page and the
// overview read, in the statement that changes the job.
func TestDeadGroupsFollowOperatorActions(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 1)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	first, second := deadJob(t, db, e, tenants[0]), deadJob(t, db, e, tenants[0])
	c := newConsole(db, e, nil)
	ctx := context.Background()
	check := func(when string, dead, flagged, pending int64) {
		t.Helper()
		d, err := c.Dead(ctx, console.DeadQuery{}, 0)
		if err != nil {
			t.Fatalf("%s: dead page: %v", when, err)
		}
		var n, f int64
		for _, g := range d.Groups {
			n, f = n+g.Count, f+g.Flagged
			if g.Kind != "k" || g.Class != job.ClassPolicy || g.Example != "approval revoked" {
				t.Fatalf("%s: group %+v", when, g)
			}
		}
		o, err := c.Overview(ctx)
		if err != nil {
			t.Fatalf("%s: overview: %v", when, err)
		}
		if n != dead || f != flagged || int64(len(d.Rows)) != dead || o.Totals.Dead != dead || o.Totals.Flagged != flagged || o.Totals.Pending != pending {
			t.Fatalf("%s: groups %d/%d, %d rows, overview %+v; want dead %d flagged %d pending %d",
				when, n, f, len(d.Rows), o.Totals, dead, flagged, pending)
		}
	}
	check("two dead", 2, 2, 0)
	if _, err := c.Act(ctx, console.Operator{UserID: staff}, console.ActionRetry, first, "fixed"); err != nil {
		t.Fatal(err)
	}
	check("after retry", 1, 1, 1)
	if _, err := c.Act(ctx, console.Operator{UserID: staff}, console.ActionDiscard, second, "obsolete"); err != nil {
		t.Fatal(err)
	}
	check("after discard", 0, 0, 1)
}

// TestJobsUnindexedFilterSearchesWindows: a filter no index serves (a
// kind, without a tenant) searches one window of ids per page; a page that
// finds too few continues below its window, and following "older" reaches
// an old match.
func TestJobsUnindexedFilterSearchesWindows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 1)
	e := newEngine(t, db, job.Config{})
	ctx := context.Background()
	rare := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[0], Kind: "rare", Payload: json.RawMessage(`{}`)})
	ps := make([]job.EnqueueParams, 250)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenants[0], Kind: "common", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := e.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	c := console.New(console.Config{App: db.App, System: db.System, Kinds: e, ScanWindow: 100,
		Tenants: tenant.NewService(db.App, db.System, nil), Audit: audit.NewService(db.App, db.System)})

	common, err := c.Jobs(ctx, console.JobQuery{Kind: "common"}, 0)
	if err != nil || len(common.Rows) != 50 || common.SearchedFrom != 0 || common.Next == 0 {
		t.Fatalf("common kind: %d rows, searched from %d, next %d, %v", len(common.Rows), common.SearchedFrom, common.Next, err)
	}
	var before int64
	for page := 1; ; page++ {
		res, err := c.Jobs(ctx, console.JobQuery{Kind: "rare"}, before)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) == 1 && res.Rows[0].ID == rare.ID {
			if page != 3 || res.Next != 0 {
				t.Fatalf("found the rare job on page %d (next %d), want page 3 of windows of 100 over 251 jobs, the last", page, res.Next)
			}
			break
		}
		if len(res.Rows) != 0 || res.SearchedFrom == 0 || res.Next != res.SearchedFrom || (before != 0 && before-res.SearchedFrom != 100) {
			t.Fatalf("page %d below %d: %d rows, searched from %d, next %d", page, before, len(res.Rows), res.SearchedFrom, res.Next)
		}
		before = res.Next
		if page > 3 {
			t.Fatal("did not reach the rare job")
		}
	}
	// With a tenant the filter is served by an index: no window.
	one, err := c.Jobs(ctx, console.JobQuery{Kind: "rare", Tenant: "tenant-1"}, 0)
	if err != nil || len(one.Rows) != 1 || one.SearchedFrom != 0 {
		t.Fatalf("rare kind of one tenant: %d rows, searched from %d, %v", len(one.Rows), one.SearchedFrom, err)
	}
}

// TestTenantJobsKindFilterSearchesWindows: a tenant's jobs filtered by a
// kind (no index) are searched one window of ids at a time, each page
// saying where it stopped, until the rare job is found; the tabs count
// each state's jobs of that kind; a kind over job.MaxKindLen is refused.
func TestTenantJobsKindFilterSearchesWindows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	ctx := context.Background()
	rare := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[0], Kind: "rare", Payload: json.RawMessage(`{}`)})
	enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[1], Kind: "rare", Payload: json.RawMessage(`{}`)})
	ps := make([]job.EnqueueParams, 250)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenants[0], Kind: "common", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := e.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	c := console.New(console.Config{App: db.App, System: db.System, Kinds: e, ScanWindow: 100,
		Tenants: tenant.NewService(db.App, db.System, nil), Audit: audit.NewService(db.App, db.System)})

	var before int64
	for page := 1; ; page++ {
		res, err := c.TenantJobsWithCounts(ctx, tenants[0], console.TenantJobQuery{Kind: "rare"}, before)
		if err != nil {
			t.Fatal(err)
		}
		if res.Counts[0].N != 1 || res.Counts[0].AtLeast || res.Counts[1].State != job.StatePending || res.Counts[1].N != 1 {
			t.Fatalf("counts of the rare kind: %+v", res.Counts)
		}
		if len(res.Rows) == 1 && res.Rows[0].ID == rare.ID {
			if page != 3 || res.Next != 0 {
				t.Fatalf("found the rare job on page %d (next %d), want page 3 of windows of 100 over 251 jobs", page, res.Next)
			}
			break
		}
		if len(res.Rows) != 0 || res.SearchedFrom == 0 || res.Next != res.SearchedFrom {
			t.Fatalf("page %d below %d: %d rows, searched from %d, next %d", page, before, len(res.Rows), res.SearchedFrom, res.Next)
		}
		before = res.Next
		if page > 3 {
			t.Fatal("did not reach the rare job")
		}
	}
	all, err := c.TenantJobsWithCounts(ctx, tenants[0], console.TenantJobQuery{}, 0)
	if err != nil || len(all.Rows) != 50 || all.SearchedFrom != 0 || all.Counts[0].N != 251 || all.Counts[1].N != 251 {
		t.Fatalf("unfiltered: %d rows, searched from %d, counts %+v, %v", len(all.Rows), all.SearchedFrom, all.Counts, err)
	}
	for _, q := range []console.TenantJobQuery{{Kind: strings.Repeat("k", job.MaxKindLen+1)}, {State: "exploded"}} {
		if _, err := c.TenantJobsWithCounts(ctx, tenants[0], q, 0); apperr.CodeOf(err) != apperr.CodeInvalid {
			t.Fatalf("%+v: %v, want invalid", q, err)
		}
	}
}

// TestJobsUnfilteredPagesEveryJob: the list without filters (a statement
// of its own) pages through every job of every tenant, running ones
// included, newest first, each once.
func TestJobsUnfilteredPagesEveryJob(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	ctx := context.Background()
	ps := make([]job.EnqueueParams, 120)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := e.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	// A few running jobs, spread over the ids (another branch of the list).
	if _, err := db.Admin.Exec(ctx, `UPDATE jobs SET state = 'running', worker_id = 'w', lease_expires_at = now() + interval '1 hour'
		WHERE id % 17 = 0`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Admin.Query(ctx, "SELECT id FROM jobs ORDER BY id DESC")
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(want) != 120 {
		t.Fatalf("jobs: %d (%v)", len(want), err)
	}
	c := newConsole(db, e, nil)
	var got []int64
	var before int64
	for page := 0; ; page++ {
		res, err := c.Jobs(ctx, console.JobQuery{}, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rows {
			got = append(got, r.ID)
		}
		if res.Next == 0 {
			break
		}
		before = res.Next
		if page > 5 {
			t.Fatal("more pages than jobs")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("unfiltered pages: %v\nwant %v", got, want)
	}
}
