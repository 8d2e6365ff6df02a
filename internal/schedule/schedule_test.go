package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
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
	tenants := count(`SELECT count(*) FROM tenants`)
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
