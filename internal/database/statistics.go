package database

import (
	"context"
	"fmt"
)

// refreshSQL passes the unfinished jobs as the staff overview counts them
// (job_counts and the deltas not folded into it yet, exact in one
// snapshot): the function runs as the tables' owner, which those
// counters' row-level security does not let read them.
const refreshSQL = `SELECT app_refresh_statistics($1::int,
	((SELECT coalesce(sum(unfinished), 0) FROM job_counts) + (SELECT coalesce(sum(unfinished), 0) FROM job_count_deltas))::bigint)`

// statisticsPerPass bounds the tables one RefreshStatistics analyzes, so a
// pass after a bulk load does not hold the maintenance leader for long.
const statisticsPerPass = 8

// RefreshStatistics analyzes the tables whose statistics autovacuum's own
// rule calls stale (app_refresh_statistics, db/schema/00149), and the job
// table when it holds far more unfinished jobs than its statistics
// believe (00158), and returns their names. Cached generic plans are made
// from statistics and kept until the next ANALYZE: on a table that grew
// tenfold since, a plan can scan it whole for every row of another. db
// must run as the system role.
func RefreshStatistics(ctx context.Context, db Querier) ([]string, error) {
	var tables []string
	if err := db.QueryRow(ctx, refreshSQL, statisticsPerPass).Scan(&tables); err != nil {
		return nil, fmt.Errorf("refresh statistics: %w", err)
	}
	return tables, nil
}
