package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// claimPeriod inserts the period's run row; false when it exists (the
// period ran already, here or on another replica).
func claimPeriod(ctx context.Context, tx pgx.Tx, name string, p Period, now time.Time, workerID string) (bool, error) {
	_, err := queries.New(tx).ScheduleRunClaim(ctx, queries.ScheduleRunClaimParams{Name: name, PeriodKey: p.Key,
		PeriodStart: p.Start, RanAt: now, WorkerID: workerID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func finishPeriod(ctx context.Context, tx pgx.Tx, name, key string, jobs int, summary string) error {
	return queries.New(tx).ScheduleRunFinish(ctx, queries.ScheduleRunFinishParams{Name: name, PeriodKey: key, Jobs: int32(jobs), Summary: summary})
}

// lastRun is a schedule's latest run.
type lastRun struct {
	PeriodKey string
	RanAt     time.Time
	WorkerID  string
	Jobs      int
	Summary   string
}

// latestRuns returns the latest run of each of names that ran, and the
// database's clock as of the read.
func latestRuns(ctx context.Context, db database.Querier, names []string) (map[string]lastRun, time.Time, error) {
	rows, err := queries.New(db).ScheduleRunLatest(ctx, names)
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(rows) == 0 { // the query answers at least its clock's row
		return nil, time.Time{}, errors.New("schedule runs: no row with the database clock")
	}
	out := make(map[string]lastRun, len(rows))
	for _, r := range rows {
		if r.Name != "" { // "": no schedule has run, the row only tells the time
			out[r.Name] = lastRun{PeriodKey: r.PeriodKey, RanAt: r.RanAt, WorkerID: r.WorkerID, Jobs: int(r.Jobs), Summary: r.Summary}
		}
	}
	return out, rows[0].ReadAt, nil
}

// TenantIDs lists every tenant, for per-tenant schedules.
func TenantIDs(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	return queries.New(tx).ScheduleTenantIDs(ctx)
}
