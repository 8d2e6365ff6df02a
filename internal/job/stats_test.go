package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestStatsPrune: the leader's prune drops rollup minutes older than the
// window and keeps the rest.
func TestStatsPrune(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	now := time.Date(2026, 11, 30, 8, 2, 30, 0, time.UTC)
	ctx := context.Background()
	for _, m := range []time.Time{now.Add(-150 * time.Second).Truncate(time.Minute), now.Truncate(time.Minute)} {
		for _, tn := range tenants {
			if _, err := db.Admin.Exec(ctx, `INSERT INTO job_stats_minute (tenant_id, minute, kind, succeeded) VALUES ($1, $2, 'k', 1)`, tn, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Rows of 08:00 (two tenants) are older than a minute at 08:02:30.
	if n, err := job.StatsPrune(ctx, db.System, &now, time.Minute); err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
}
