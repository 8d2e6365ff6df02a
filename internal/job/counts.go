package job

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// RebuildCounts recounts the staff pages' maintained counts (unfinished
// jobs per tenant and kind, dead letters per group) from the jobs table, in
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
