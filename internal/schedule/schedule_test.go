package schedule_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/testdb"
)

func TestPeriods(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 17, 30, 0, 0, time.UTC) // a Wednesday
	cases := []struct {
		e          schedule.Every
		key        string
		start, end time.Time
	}{
		{schedule.Daily, "2026-03-04", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{schedule.Weekly, "2026-W10", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)},
		{schedule.Hourly, "2026-03-04T17", time.Date(2026, 3, 4, 17, 0, 0, 0, time.UTC), time.Date(2026, 3, 4, 18, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		p := schedule.PeriodAt(c.e, at)
		if p.Key != c.key || !p.Start.Equal(c.start) || !p.End.Equal(c.end) {
			t.Errorf("%s: %+v", c.e, p)
		}
	}
}

// TestTwoLeadersScheduleEachPeriodOnce: two replicas that both believe
// they lead tick at the same moments; every period of every schedule is
// enqueued once. A new day schedules the daily work again, not the weekly.
func TestTwoLeadersScheduleEachPeriodOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFrozen(time.Date(2026, 3, 4, 1, 0, 0, 0, time.UTC))
	var scheds []*schedule.Scheduler
	for _, w := range []string{"replica-a", "replica-b"} {
		e, err := job.New(job.Config{Pool: db.System, Clock: clk, WorkerID: w})
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, schedule.New(db.System, clk, w, schedule.Shipped(e)...))
	}
	count := func(sql string) int {
		var n int
		if err := db.Admin.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tenants := count(`SELECT count(*) FROM tenants WHERE NOT is_system`) // per-tenant schedules skip the system tenant
	race := func() {
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			for _, s := range scheds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Tick(ctx); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
	}
	race()
	for kind, want := range map[string]int{"subscription.sweep": tenants, "email.weekly-report": tenants, "payment.reconcile": tenants} {
		if n := count(`SELECT count(*) FROM jobs WHERE kind = '` + kind + `'`); n != want {
			t.Errorf("%s: %d jobs, want %d", kind, n, want)
		}
	}
	if n := count(`SELECT count(*) FROM schedule_runs`); n != 3 {
		t.Fatalf("schedule runs: %d", n)
	}
	clk.Advance(24 * time.Hour) // Thursday: same ISO week
	race()
	if n := count(`SELECT count(*) FROM jobs WHERE kind = 'subscription.sweep'`); n != 2*tenants {
		t.Errorf("sweep after a day: %d", n)
	}
	if n := count(`SELECT count(*) FROM jobs WHERE kind = 'email.weekly-report'`); n != tenants {
		t.Errorf("weekly report scheduled twice in one week: %d", n)
	}
	st, err := scheds[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.LastRun == nil || !s.NextRun.After(*clk.Now()) {
			t.Errorf("%s: last %v next %v", s.Name, s.LastRun, s.NextRun)
		}
	}
}

// TestRetentionSchedulesPrune: job.retention and outbox.retention run
// once per hour across two racing replicas, delete only what is past
// retention, and record each run (with what it pruned) for /admin.
func TestRetentionSchedulesPrune(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	clk := clock.NewFrozen(time.Date(2026, 3, 4, 1, 0, 0, 0, time.UTC))
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := db.Admin.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var tid int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('keep', 'keep') RETURNING id").Scan(&tid); err != nil {
		t.Fatal(err)
	}
	var scheds []*schedule.Scheduler
	var engines []*job.Engine
	for _, w := range []string{"replica-a", "replica-b"} {
		e, err := job.New(job.Config{Pool: db.System, Clock: clk, WorkerID: w, Retention: time.Hour, ScheduledPrune: true})
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
		scheds = append(scheds, schedule.New(db.System, clk, w, schedule.Retention(e, clk, 24*time.Hour)...))
	}
	enqueue := func(n int) {
		ps := make([]job.EnqueueParams, n)
		for i := range ps {
			ps[i] = job.EnqueueParams{TenantID: tid, Kind: "test.done", Payload: json.RawMessage(`{}`)}
		}
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := engines[0].EnqueueMany(ctx, tx, ps); return err }); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(3)
	jobs, err := engines[0].Claim(ctx, "replica-a", 3)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if err := engines[0].Complete(ctx, "replica-a", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Two delivered messages, one a day and a half old, and one pending.
	if _, err := db.Admin.Exec(ctx, `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, created_at, available_at, state, processed_at)
		VALUES ($1, 'test.e', 'a', '1', '{}', $2, $2, 'delivered', $2), ($1, 'test.e', 'a', '2', '{}', $3, $3, 'delivered', $3),
		       ($1, 'test.e', 'a', '3', '{}', $2, $2, 'pending', NULL)`,
		tid, clk.Now().Add(-36*time.Hour), clk.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour) // the 3 succeeded jobs are past the hour
	enqueue(1)                 // pending: never pruned

	race := func() {
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			for _, s := range scheds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Tick(ctx); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
	}
	race()
	if n := count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("jobs left after job.retention: %d, want the pending one", n)
	}
	if n := count(`SELECT count(*) FROM outbox_messages`); n != 2 {
		t.Fatalf("outbox rows left after outbox.retention: %d, want the recent delivered and the pending", n)
	}
	if n := count(`SELECT count(*) FROM schedule_runs`); n != 2 {
		t.Fatalf("schedule runs: %d, want one per retention schedule", n)
	}
	race() // same hour: claimed already
	if n := count(`SELECT count(*) FROM schedule_runs`); n != 2 {
		t.Fatalf("schedule runs after a second tick in the hour: %d", n)
	}
	st, err := scheds[1].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"job.retention": "3 finished job(s) pruned", "outbox.retention": "1 delivered message(s) pruned"}
	for _, s := range st {
		if wantKey := map[string]string{"job.retention": "schedule.result.jobs_pruned", "outbox.retention": "schedule.result.outbox_pruned"}[s.Name]; s.LastResult.Key != wantKey ||
			len(s.LastResult.Args) != 1 || s.LastResult.Args[0] != map[string]any{"job.retention": int64(3), "outbox.retention": int64(1)}[s.Name] {
			t.Errorf("%s: result %+v, want %s with its count", s.Name, s.LastResult, wantKey)
		}
		if s.LastRun == nil || s.LastSummary != want[s.Name] || s.LastPeriod != "2026-03-04T03" ||
			!s.NextRun.Equal(time.Date(2026, 3, 4, 4, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: last %v %q %q next %v", s.Name, s.LastRun, s.LastPeriod, s.LastSummary, s.NextRun)
		}
		delete(want, s.Name)
	}
	if len(want) != 0 {
		t.Fatalf("missing schedules %v", want)
	}
	clk.Advance(time.Hour)
	race()
	if n := count(`SELECT count(*) FROM schedule_runs`); n != 4 {
		t.Fatalf("schedule runs in the next hour: %d, want 4", n)
	}
}

// TestParseSummary: a stored summary reads back as its catalog key and
// count, and text that is no known result stays unparsed (shown as is).
func TestParseSummary(t *testing.T) {
	for in, want := range map[string]schedule.Text{
		"12 tenant(s)":                     {Key: "schedule.result.tenants", Args: []any{int64(12)}},
		"0 finished job(s) pruned":         {Key: "schedule.result.jobs_pruned", Args: []any{int64(0)}},
		"1234 delivered message(s) pruned": {Key: "schedule.result.outbox_pruned", Args: []any{int64(1234)}},
		"retention off":                    {Key: "schedule.result.retention_off"},
		"12 tenant(s) and more":            {},
		"something else":                   {},
	} {
		got := schedule.ParseSummary(in)
		if got.Key != want.Key || len(got.Args) != len(want.Args) || (len(want.Args) == 1 && got.Args[0] != want.Args[0]) {
			t.Errorf("ParseSummary(%q) = %+v, want %+v", in, got, want)
		}
	}
}
