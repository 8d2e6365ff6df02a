package app

import (
	"context"
	"testing"

	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestSmallestPoolsRunJobs: a replica with workers on the smallest pools
// JEJAK_DB_CONNS allows (4) runs its jobs. Its long-held sessions (the
// listeners of both engines and of the relay, the maintenance leader's)
// once took every connection of the system pool, and no job ever ran.
func TestSmallestPoolsRunJobs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := insertTenant(t, db, "kenanga", "Kenanga")
	serveUntilCleanup(t, map[string]string{"DATABASE_URL": db.URL, "JEJAK_ADDR": freeAddr(t),
		"JEJAK_WORKERS": "4", "JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": t.TempDir()})
	if _, err := db.Admin.Exec(ctx, `
		INSERT INTO jobs (tenant_id, kind, payload, max_attempts, available_at, created_at, trace_id, requested_at, payload_hash)
		SELECT $1, 'points.award', jsonb_build_object('tenant_id', $1::bigint, 'message_id', 'small-pool-' || g,
		       'customer', 'ani@kenanga.test', 'points', 1, 'reason', 'small pools'), 3, now(), now(), md5('small' || g), now(), '\x00'
		  FROM generate_series(1, 20) g`, tenant); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the replica on four-connection pools to run 20 jobs", func() bool {
		var done int
		if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE kind = 'points.award' AND state = 'succeeded'").Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done == 20
	})
	var balance int64
	if err := db.Admin.QueryRow(ctx, "SELECT balance FROM points_balances WHERE tenant_id = $1", tenant).Scan(&balance); err != nil || balance != 20 {
		t.Fatalf("balance %d (%v), want 20", balance, err)
	}
}
