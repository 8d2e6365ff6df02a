package database

import (
	"context"
	"fmt"
)

// statisticsPerPass bounds the tables one RefreshStatistics analyzes, so a
// pass after a bulk load does not hold the maintenance leader for long.
const statisticsPerPass = 8

// RefreshStatistics analyzes the tables whose statistics autovacuum's own
// rule calls stale (app_refresh_statistics, db/schema/00149) and returns
// their names. Cached generic plans are made from statistics and kept
// until the next ANALYZE: on a table that grew tenfold since, a plan can
// scan it whole for every row of another. db must run as the system role.
func RefreshStatistics(ctx context.Context, db Querier) ([]string, error) {
	var tables []string
	if err := db.QueryRow(ctx, "SELECT app_refresh_statistics($1)", statisticsPerPass).Scan(&tables); err != nil {
		return nil, fmt.Errorf("refresh statistics: %w", err)
	}
	return tables, nil
}
