package job

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// RebuildCounts recounts the staff pages' maintained counts (unfinished
// jobs and jobs scheduled ahead per tenant and kind, dead letters per
// group) from the jobs table, in
// one transaction on db (the system pool). Every statement of the engine
// and the console keeps them exact as it moves jobs; this is for a bulk
// load that wrote jobs directly (the large-data seeder) or a repair, run
// while nothing else moves jobs.
func RebuildCounts(ctx context.Context, db database.Beginner) error {
	err := database.InTx(ctx, db, func(tx pgx.Tx) error { return storeRebuildCounts(ctx, tx) })
	if err != nil {
		return fmt.Errorf("rebuild job counts: %w", err)
	}
	return nil
}

// Unfinished is every tenant's unfinished (pending or running) jobs from
// the maintained counts, exact and cheap however large the job table. db
// must run as the system role.
func Unfinished(ctx context.Context, db Querier) (int64, error) {
	n, err := storeUnfinished(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("count unfinished jobs: %w", err)
	}
	return n, nil
}

// RefreshStatistics is database.RefreshStatistics told the unfinished
// jobs, by which it sees the job table's statistics fall behind a burst;
// the maintenance leader runs it every beat. db must run as the system
// role.
func RefreshStatistics(ctx context.Context, db Querier) ([]string, error) {
	n, err := Unfinished(ctx, db)
	if err != nil {
		return nil, err
	}
	return database.RefreshStatistics(ctx, db, n)
}

// CountScheduled recounts the jobs scheduled ahead (pending, due later)
// per tenant and kind for the overview, as of the clock's now (the
// database's time when nil). The maintenance leader runs it on every
// pass; a job falls due by the clock alone, so no statement that moves
// jobs can keep this count, and the overview says when it was taken.
func CountScheduled(ctx context.Context, db Querier, now *time.Time) error {
	if err := storeCountScheduled(ctx, db, now); err != nil {
		return fmt.Errorf("count jobs scheduled ahead: %w", err)
	}
	return nil
}
