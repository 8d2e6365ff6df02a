package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// The claim's candidates (outbox_claimable) must cost a few pages per
// candidate whatever the backlog, even on a table that was never analysed,
// where the planner's estimates once made the claim hash the whole table
// and sort it. Buffers, unlike time, do not depend on the machine's load.
func TestClaimableReadsLittleOnAnUnanalysedBacklog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	// No statistics for the planner: the state of a new database.
	if _, err := db.Admin.Exec(ctx, "ALTER TABLE outbox_messages SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, created_at, available_at)
		SELECT $1, 'project.updated', 'project', (g % 2000)::text, jsonb_build_object('seq', g), now(), now()
		  FROM generate_series(1, 20000) g`, tid); err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := db.Admin.QueryRow(ctx, "SELECT pg_relation_size('outbox_messages') / 8192").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	var blocks float64
	err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		// The first call in a session also fills the catalog caches.
		var plan []byte
		for range 2 {
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT outbox_claimable(10, now())").Scan(&plan); err != nil {
				return err
			}
		}
		var out []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal(plan, &out); err != nil {
			return err
		}
		for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
			v, _ := out[0].Plan[k].(float64)
			blocks += v
		}
		return tx.QueryRow(ctx, "SELECT outbox_claimable(10, now())").Scan(&ids)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 10 {
		t.Fatalf("claimable = %v, want 10 ids", ids)
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("claimable = %v, want the 10 oldest (one per aggregate)", ids)
		}
	}
	if blocks > 200 || blocks >= float64(pages) {
		t.Fatalf("a claim of 10 touched %.0f buffers (table: %d pages); the plan is scanning the backlog", blocks, pages)
	}
	t.Logf("claim of 10 over 20,000 pending rows: %.0f buffers, table %d pages", blocks, pages)
}
