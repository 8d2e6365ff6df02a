package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// JobSnapshot returns a loader of the queue gauges from db (the system
// pool): one statement over the three partial indexes of jobs.
func JobSnapshot(db database.Querier, clk clock.Clock) func(context.Context) (*QueueSnapshot, error) {
	if clk == nil {
		clk = clock.Database{}
	}
	return func(ctx context.Context) (*QueueSnapshot, error) {
		rows, err := queries.New(db).MetricsJobStates(ctx, clk.Now())
		if err != nil {
			return nil, fmt.Errorf("metrics job snapshot: %w", err)
		}
		s := &QueueSnapshot{Jobs: map[string]int64{}, OldestPendingAge: map[string]time.Duration{}}
		for _, r := range rows {
			s.Jobs[r.State] += r.N
			if r.State == "pending" {
				s.OldestPendingAge[r.Queue] = max(r.AsOf.Sub(r.Oldest), 0)
			}
		}
		return s, nil
	}
}
