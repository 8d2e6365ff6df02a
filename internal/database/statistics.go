package database

import (
	"context"
	"fmt"
	"slices"
)

// statisticsPerPass bounds the tables one RefreshStatistics analyzes, so a
// pass after a bulk load does not hold the maintenance leader for long.
const statisticsPerPass = 8

// RefreshStatistics analyzes the tables whose statistics autovacuum's own
// rule calls stale (app_refresh_statistics, db/schema/00149), and the job
// table when it holds far more than its statistics believe of
// jobsUnfinished, the unfinished jobs the job engine counts (00158), and
// returns their names. Cached generic plans are made from statistics and
// kept until the next ANALYZE: on a table that grew tenfold since, a plan
// can scan it whole for every row of another. db must run as the system
// role.
//
// Each table is analyzed by a statement of its own, the most stale first:
// a statement holds its snapshot, and with it the cluster's xmin horizon,
// until it ends, and eight tables analyzed in one held it for up to two
// seconds under load, while no dead row anywhere could be pruned.
func RefreshStatistics(ctx context.Context, db Querier, jobsUnfinished int64) ([]string, error) {
	var analyzed []string
	for range statisticsPerPass {
		var tables []string
		if err := db.QueryRow(ctx, "SELECT app_refresh_statistics(1, $1)", jobsUnfinished).Scan(&tables); err != nil {
			return analyzed, fmt.Errorf("refresh statistics: %w", err)
		}
		// The same table again: another session held it (SKIP_LOCKED),
		// so it is still stale; the next pass tries again.
		if len(tables) == 0 || slices.Contains(analyzed, tables[0]) {
			break
		}
		analyzed = append(analyzed, tables...)
	}
	return analyzed, nil
}
