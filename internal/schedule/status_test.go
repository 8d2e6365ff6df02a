package schedule_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestStatusReadsRunsAndClockTogether: the status panel (on every staff
// overview) reads the schedules' latest runs and the database clock their
// next runs are computed from in one statement, before any schedule has
// run and after.
func TestStatusReadsRunsAndClockTogether(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	log := &testdb.StatementLog{}
	pool := log.Pool(t, db.System)
	e, err := job.New(job.Config{Pool: db.System})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(pool, clock.Database{}, "status-test", schedule.Shipped(e)...)
	if err := pool.Ping(ctx); err != nil { // the pool's connection set-up is not the panel's
		t.Fatal(err)
	}
	dbNow := func() time.Time {
		var now time.Time
		if err := db.Admin.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	status := func() []schedule.Status {
		t.Helper()
		log.Take("")
		st, err := s.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stmts := log.Take(""); len(stmts) != 1 || !strings.Contains(stmts[0], "name: ScheduleRunLatest ") {
			t.Fatalf("status sent %d statements, want ScheduleRunLatest alone: %q", len(stmts), stmts)
		}
		return st
	}

	before := dbNow()
	st := status()
	after := dbNow()
	if len(st) == 0 {
		t.Fatal("no schedules")
	}
	for _, x := range st {
		// Never run: due now, by the database's clock.
		if x.LastRun != nil || x.NextRun.Before(before) || x.NextRun.After(after) {
			t.Errorf("%s before any run: last %v, next %v, want due between %v and %v", x.Name, x.LastRun, x.NextRun, before, after)
		}
	}

	// A weekly schedule: its period does not end between the insert and
	// the read below (an hourly one could, at the turn of an hour).
	ran := st[0]
	for _, x := range st {
		if x.Every == schedule.Weekly {
			ran = x
		}
	}
	if ran.Every != schedule.Weekly {
		t.Fatalf("no weekly schedule among %d", len(st))
	}
	p := schedule.PeriodAt(ran.Every, dbNow())
	if _, err := db.Admin.Exec(ctx, `INSERT INTO schedule_runs (name, period_key, period_start, ran_at, worker_id, jobs, summary)
		VALUES ($1, $2, $3, now(), 'status-test', 2, '')`, ran.Name, p.Key, p.Start); err != nil {
		t.Fatal(err)
	}
	for _, x := range status() {
		switch {
		case x.Name == ran.Name:
			if x.LastRun == nil || x.LastPeriod != p.Key || x.LastJobs != 2 || !x.NextRun.Equal(p.End) {
				t.Errorf("%s after its run: last %v (%s, %d jobs), next %v, want %s and next %v", x.Name, x.LastRun, x.LastPeriod, x.LastJobs, x.NextRun, p.Key, p.End)
			}
		case x.LastRun != nil || x.NextRun.Before(before):
			t.Errorf("%s never ran: last %v, next %v", x.Name, x.LastRun, x.NextRun)
		}
	}
}
