package job

import (
	"context"
	"fmt"
	"time"
)

// StatsFoldDays folds every tenant's per-minute rollup since the last
// fold's mark into the per-day rollup that owners' 30-day charts read, and
// moves the mark (JobStatsFoldDays says how). The maintenance leader runs
// it every pass before pruning minutes, so a minute is folded long before
// it goes.
func StatsFoldDays(ctx context.Context, db Querier, now *time.Time) (int64, error) {
	n, err := storeStatsFoldDays(ctx, db, now)
	if err != nil {
		return 0, fmt.Errorf("fold job stats into days: %w", err)
	}
	return n, nil
}
