package job

import (
	"context"
	"fmt"
	"time"
)

// StatsFoldDays folds every tenant's per-minute rollup of yesterday and
// today (local days, all of whose minutes are still kept) into the per-day
// rollup that owners' 30-day charts read. The maintenance leader runs it
// before pruning minutes, so a day is folded whole before its minutes go.
func StatsFoldDays(ctx context.Context, db Querier, now *time.Time) (int64, error) {
	n, err := storeStatsFoldDays(ctx, db, now)
	if err != nil {
		return 0, fmt.Errorf("fold job stats into days: %w", err)
	}
	return n, nil
}
