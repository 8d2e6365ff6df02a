package activity_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/activity"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDaysCountsEventsAndJobsPerLocalDay: events are counted per day in the
// tenant's zone by the insert trigger (an event at 23:30 UTC is the next
// day in Jakarta); job outcomes come from folded days and, for the last
// two days, from the minutes, never twice; another tenant's figures stay
// out (row-level security on the rollups).
func TestDaysCountsEventsAndJobsPerLocalDay(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantID, other int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('a', 'A') RETURNING id`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('b', 'B') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	jkt, _ := time.LoadLocation("Asia/Jakarta")
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, jkt) // 03:00 UTC
	clk := clock.NewFrozen(now)
	rec := audit.NewRecorder(clk)
	record := func(tenant int64, at time.Time) {
		clk.Set(at)
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
			_, err := rec.Record(ctx, tx, audit.Event{TenantID: tenant, ActorKind: audit.ActorSystem, Action: "test.event", Entity: "x", EntityID: "1"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// 28 Nov 23:30 UTC is 29 Nov 06:30 in Jakarta.
	record(tenantID, time.Date(2026, 11, 20, 9, 0, 0, 0, jkt))
	record(tenantID, time.Date(2026, 11, 28, 23, 30, 0, 0, time.UTC))
	record(tenantID, time.Date(2026, 11, 29, 8, 0, 0, 0, jkt))
	record(tenantID, now.Add(-time.Hour))
	record(other, now.Add(-time.Hour))

	// Jobs: a folded day long ago, and minutes yesterday and today.
	if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_day (tenant_id, day, succeeded, failed, dead) VALUES ($1, '2026-11-25', 4, 2, 1)`, tenantID); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		at           time.Time
		tenant       int64
		ok, fail, dd int
	}{
		{time.Date(2026, 11, 29, 9, 0, 0, 0, jkt), tenantID, 1, 1, 0},
		{now.Add(-2 * time.Hour), tenantID, 2, 0, 0},
		{now.Add(-2 * time.Hour), other, 9, 9, 9},
	} {
		if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_minute (tenant_id, minute, kind, succeeded, failed, dead) VALUES ($1, $2, 'k', $3, $4, $5)`,
			m.tenant, m.at, m.ok, m.fail, m.dd); err != nil {
			t.Fatal(err)
		}
	}
	// Folding the last two days (as maintenance does) must not double them.
	if _, err := job.StatsFoldDays(ctx, db.System, &now); err != nil {
		t.Fatal(err)
	}
	// Events are counted by day as the sealer seals them.
	if err := audit.NewSealer(db.System, audit.SealerOptions{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	chart := activity.NewChart(tenantID, jkt, now, 30)
	if err := database.ReadTenantAll(ctx, db.App, tenantID, chart.Reads(ctx)...); err != nil {
		t.Fatal(err)
	}
	days := chart.Days()
	if len(days) != 30 || days[29].Date.Format(time.DateOnly) != "2026-11-30" || days[0].Date.Format(time.DateOnly) != "2026-11-01" {
		t.Fatalf("days span %s … %s (%d)", days[0].Date, days[len(days)-1].Date, len(days))
	}
	got := map[string]activity.Day{}
	for _, d := range days {
		got[d.Date.Format(time.DateOnly)] = d
	}
	for day, want := range map[string]activity.Day{
		"2026-11-20": {Events: 1},
		"2026-11-25": {Succeeded: 4, Failed: 2, Dead: 1},
		"2026-11-29": {Events: 2, Succeeded: 1, Failed: 1},
		"2026-11-30": {Events: 1, Succeeded: 2},
		"2026-11-28": {},
	} {
		d := got[day]
		d.Date = time.Time{}
		if d != want {
			t.Errorf("%s: %+v, want %+v", day, d, want)
		}
	}
}

// TestDayCountsMatchTheTrailAfterABulkLoad: once the sealer has sealed the
// large-data seeder's multi-row inserts (in batches spanning days and
// tenants), the per-day counts are exact.
func TestDayCountsMatchTheTrailAfterABulkLoad(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var a, b int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('a', 'A') RETURNING id`).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name, time_zone) VALUES ('b', 'B', 'UTC') RETURNING id`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.SeedScale(ctx, db.System, []int64{a, b}, 20000, audit.SeedOptions{BatchSize: 3000, Step: 17 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := audit.NewSealer(db.System, audit.SealerOptions{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var mismatched, days int
	if err := db.Admin.QueryRow(ctx, `
		WITH truth AS (
			SELECT e.tenant_id, (e.occurred_at AT TIME ZONE t.time_zone)::date AS day, count(*) AS n
			FROM audit_events e JOIN tenants t ON t.id = e.tenant_id GROUP BY 1, 2)
		SELECT count(*) FILTER (WHERE c.events IS DISTINCT FROM truth.n), count(*)
		FROM truth FULL JOIN audit_day_counts c USING (tenant_id, day)`).Scan(&mismatched, &days); err != nil {
		t.Fatal(err)
	}
	if mismatched != 0 || days < 4 {
		t.Fatalf("%d of %d tenant-days counted wrong", mismatched, days)
	}
}

// TestJobDaysReadOnlyTheMinutesTheFoldDidNotReach: the chart's job days
// are the folded day rows plus the minutes from the last fold's mark on
// (two minutes before the fold's minute), every minute counted once on
// either side of the mark, before any fold, between folds and after the
// next. The first fold replaces yesterday's and today's rows (left by
// folds from before the mark existed); each later one adds only the
// minutes from the previous mark to its own: a folded minute is not read
// again, and folding twice at the same moment, or with a clock behind the
// mark, adds nothing.
func TestJobDaysReadOnlyTheMinutesTheFoldDidNotReach(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantID int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name, time_zone) VALUES ('a', 'A', 'Asia/Jakarta') RETURNING id`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	jkt, _ := time.LoadLocation("Asia/Jakarta")
	now := time.Date(2026, 11, 30, 10, 0, 30, 0, jkt) // the first fold's mark: 09:58
	minute := func(at time.Time, ok, fail int) {
		t.Helper()
		if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_minute (tenant_id, minute, kind, succeeded, failed, dead) VALUES ($1, $2, 'k', $3, $4, 0)`,
			tenantID, at, ok, fail); err != nil {
			t.Fatal(err)
		}
	}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, jkt) }
	minute(time.Date(2026, 11, 29, 9, 0, 0, 0, jkt), 1, 1)
	minute(at(7, 0), 2, 0)
	minute(at(9, 57), 4, 0) // the last minute the first fold takes
	minute(at(9, 58), 3, 0) // the mark itself: left to the minutes
	// A row of today from a fold before the mark existed (the minutes'
	// sum then): the first fold replaces it.
	if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_day (tenant_id, day, succeeded, failed, dead) VALUES ($1, '2026-11-30', 2, 0, 0)`, tenantID); err != nil {
		t.Fatal(err)
	}
	check := func(when string, yesterday, today [2]int64) {
		t.Helper()
		chart := activity.NewChart(tenantID, jkt, now, 7)
		if err := database.ReadTenantAll(ctx, db.App, tenantID, chart.Reads(ctx)...); err != nil {
			t.Fatal(err)
		}
		days := chart.Days()
		for i, want := range map[int][2]int64{5: yesterday, 6: today} {
			if got := [2]int64{days[i].Succeeded, days[i].Failed}; got != want {
				t.Errorf("%s: %s succeeded/failed %v, want %v", when, days[i].Date.Format(time.DateOnly), got, want)
			}
		}
	}
	fold := func(at time.Time) {
		t.Helper()
		if _, err := job.StatsFoldDays(ctx, db.System, &at); err != nil {
			t.Fatal(err)
		}
	}
	fold(now)
	check("after the first fold", [2]int64{1, 1}, [2]int64{9, 0})
	fold(now)
	fold(now.Add(-10 * time.Minute))
	check("folded again at the same moment and with a clock behind", [2]int64{1, 1}, [2]int64{9, 0})
	minute(at(9, 59), 5, 0)
	check("a minute after the mark", [2]int64{1, 1}, [2]int64{14, 0})
	if _, err := db.Admin.Exec(ctx, `UPDATE job_stats_minute SET succeeded = 1000 WHERE tenant_id = $1 AND minute = $2`, tenantID, at(7, 0)); err != nil {
		t.Fatal(err)
	}
	check("a folded minute changed", [2]int64{1, 1}, [2]int64{14, 0})
	minute(at(10, 4), 6, 0)
	fold(now.Add(5 * time.Minute)) // mark 10:03: takes 09:58 and 09:59
	check("the next fold", [2]int64{1, 1}, [2]int64{20, 0})
	var day [3]int64
	if err := db.Admin.QueryRow(ctx, `SELECT succeeded, failed, dead FROM job_stats_day WHERE tenant_id = $1 AND day = '2026-11-30'`, tenantID).
		Scan(&day[0], &day[1], &day[2]); err != nil {
		t.Fatal(err)
	}
	if day != [3]int64{14, 0, 0} {
		t.Errorf("today's folded row %v, want [14 0 0] (up to 10:02, the changed 07:00 as first folded)", day)
	}
	// The leader away for three days: its next fold still takes every
	// minute from the mark, those more than 48 hours old too (they are
	// pruned only after it).
	minute(at(12, 0), 3, 0)
	fold(now.AddDate(0, 0, 3))
	if err := db.Admin.QueryRow(ctx, `SELECT succeeded, failed, dead FROM job_stats_day WHERE tenant_id = $1 AND day = '2026-11-30'`, tenantID).
		Scan(&day[0], &day[1], &day[2]); err != nil {
		t.Fatal(err)
	}
	if day != [3]int64{23, 0, 0} {
		t.Errorf("the folded row of three days before %v, want [23 0 0] (with 10:04 and 12:00)", day)
	}
}

// TestJobDaysBoundTheMinutesByTheMark: under the tenant's scoping (row-level
// security on the rollup), the mark bounds the index scan of
// job_stats_minute rather than filtering every minute of the tenant: only
// a leakproof condition can become an index condition below the policy's,
// and a COALESCE around the mark's subquery is not one (it made the
// chart's statement a scan of every tenant's minutes). Sequential scans
// are off so that the plan shows what the index can be given even on a
// test's small table.
func TestJobDaysBoundTheMinutesByTheMark(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantID int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('a', 'A') RETURNING id`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	jkt, _ := time.LoadLocation("Asia/Jakarta")
	chart := activity.NewChart(tenantID, jkt, time.Date(2026, 11, 30, 10, 0, 0, 0, jkt), 30)
	ex := &explaining{plans: map[string][]map[string]any{}}
	err := database.InTenantTx(ctx, db.App, tenantID, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		ex.tx = tx
		for _, read := range chart.Reads(ctx) {
			if err := read(ex); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := ex.plans["JobStatsDayList"]
	if !ok {
		t.Fatalf("the chart's reads sent no JobStatsDayList (sent %v)", ex.plans)
	}
	// The mark is the output of the InitPlan that reads job_stats_folded
	// ("InitPlan 2 (returns $1)"); the chart's own bounds are constants in
	// this plan.
	nodes := testdb.PlanNodes(plan[0]["Plan"].(map[string]any))
	mark := ""
	for _, n := range nodes {
		if m := initPlanReturns.FindStringSubmatch(fmt.Sprint(n["Subplan Name"])); m != nil && n["Relation Name"] == "job_stats_folded" {
			mark = m[1]
		}
	}
	if mark == "" {
		t.Fatal("no InitPlan reads the fold's mark from job_stats_folded")
	}
	found := false
	for _, n := range nodes {
		if n["Relation Name"] != "job_stats_minute" {
			continue
		}
		found = true
		cond, _ := n["Index Cond"].(string)
		if !strings.Contains(cond, "minute >= "+mark+")") {
			t.Errorf("job_stats_minute read by %s, index condition %q, filter %q: the mark does not bound the scan",
				n["Node Type"], cond, n["Filter"])
		}
	}
	if !found {
		t.Fatal("the chart's statement does not read job_stats_minute")
	}
}

// explaining is a database.Querier that plans each query it is given
// (EXPLAIN (FORMAT JSON), kept under the query's sqlc name) before
// running it on tx as sent.
type explaining struct {
	tx    pgx.Tx
	plans map[string][]map[string]any
}

var (
	queryName       = regexp.MustCompile(`-- name: (\w+)`)
	initPlanReturns = regexp.MustCompile(`^InitPlan \d+ \(returns (\$\d+)\)$`)
)

func (e *explaining) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var plan []map[string]any
	if err := e.tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return nil, err
	}
	if m := queryName.FindStringSubmatch(sql); m != nil {
		e.plans[m[1]] = plan
	}
	return e.tx.Query(ctx, sql, args...)
}

func (e *explaining) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return e.tx.QueryRow(ctx, sql, args...)
}

func (e *explaining) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.tx.Exec(ctx, sql, args...)
}

// TestFoldsAtOnceFoldEachMinuteOnce: a fold that starts while another's
// transaction is still open (the leadership changing hands) waits for it
// and then folds only from the mark it left, so no minute is added twice.
func TestFoldsAtOnceFoldEachMinuteOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantID int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name, time_zone) VALUES ('a', 'A', 'UTC') RETURNING id`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-time.Hour), now.Add(-30 * time.Minute)} {
		if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_minute (tenant_id, minute, kind, succeeded, failed, dead) VALUES ($1, $2, 'k', $3, 0, 0)`,
			tenantID, at.Truncate(time.Minute), i+1); err != nil {
			t.Fatal(err)
		}
	}
	early := now.Add(-2 * time.Hour) // the first fold: the 07:00 minute, mark 07:58
	if _, err := job.StatsFoldDays(ctx, db.System, &early); err != nil {
		t.Fatal(err)
	}
	first, err := db.System.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := job.StatsFoldDays(ctx, first, &now); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		later := now.Add(time.Minute)
		_, err := job.StatsFoldDays(ctx, db.System, &later)
		second <- err
	}()
	testwait.For(t, "the second fold to wait for the first", func() bool {
		var n int
		if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	var succeeded int64
	if err := db.Admin.QueryRow(ctx, `SELECT succeeded FROM job_stats_day WHERE tenant_id = $1 AND day = '2026-11-30'`, tenantID).Scan(&succeeded); err != nil {
		t.Fatal(err)
	}
	if succeeded != 1+2+3 {
		t.Errorf("today's folded row counts %d attempts, want 6 (each minute once)", succeeded)
	}
}
